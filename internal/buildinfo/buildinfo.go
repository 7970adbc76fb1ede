// Package buildinfo tells which build of mcp-extproc is running: the
// version and commit that hack/build.sh stamps into every binary with the
// linker (go build -ldflags "-X ...version=... -X ...commit=..."), and the
// Go release that built it.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker only (hack/build.sh); never written at run time.
var (
	version string
	commit  string
)

// Unstamped is the version of a binary built without hack/build.sh
// (go run, go test, a plain go build).
const Unstamped = "dev"

// Version returns the version stamped at build: `git describe --tags
// --always --dirty` of the checkout, or the VERSION given to hack/build.sh
// (a release tag in the image build). [Unstamped] when none was.
func Version() string {
	if version == "" {
		return Unstamped
	}
	return version
}

// Commit returns the full commit hash stamped at build; for an unstamped
// binary, the revision the go command recorded (a go build in a git
// checkout, with "-dirty" for uncommitted changes), else "unknown".
func Commit() string {
	if commit != "" {
		return commit
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	switch {
	case rev == "":
		return "unknown"
	case dirty:
		return rev + "-dirty"
	}
	return rev
}

// GoVersion returns the Go release the binary was built with.
func GoVersion() string { return runtime.Version() }

// String describes the build in one line, as `--version` prints it:
// "NAME VERSION (commit COMMIT, GOVERSION)".
func String(name string) string {
	return fmt.Sprintf("%s %s (commit %s, %s)", name, Version(), Commit(), GoVersion())
}
