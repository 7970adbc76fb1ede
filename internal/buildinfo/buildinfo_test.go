package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestUnstamped(t *testing.T) {
	if Version() != Unstamped {
		t.Errorf("Version() = %q in a test binary, want %q", Version(), Unstamped)
	}
	if Commit() == "" {
		t.Error("Commit() is empty")
	}
	s := String("extproc")
	if !strings.HasPrefix(s, "extproc dev (commit ") || !strings.HasSuffix(s, ", "+runtime.Version()+")") {
		t.Errorf("String() = %q", s)
	}
}

// TestBuildScriptStamps runs hack/build.sh with a stand-in for go that
// records its arguments, then builds a small program with the -ldflags the
// script passed: what the script stamps reaches Version and Commit (a
// renamed variable or a wrong package path would print "dev").
func TestBuildScriptStamps(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fake := t.TempDir()
	argsFile := filepath.Join(fake, "args")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > " + argsFile + "\n"
	if err := os.WriteFile(filepath.Join(fake, "go"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "hack/build.sh", "extproc", t.TempDir())
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+fake+string(os.PathListSeparator)+os.Getenv("PATH"),
		"VERSION=v9.8.7-test", "COMMIT=0123456789abcdef")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/build.sh: %v\n%s", err, out)
	}
	data, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	var ldflags string
	for _, a := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(a, "-ldflags="); ok {
			ldflags = v
		}
	}
	if ldflags == "" {
		t.Fatalf("hack/build.sh passed no -ldflags: %q", data)
	}
	bin := filepath.Join(t.TempDir(), "stamp")
	// -trimpath and no DWARF, as make test builds (the Makefile's
	// TEST_BUILD): the standard library's race-free compiles are then the
	// ones the deploy checks and helm use, not a third set of them.
	build := exec.Command("go", "build", "-trimpath", "-gcflags=all=-dwarf=false", "-ldflags="+ldflags, "-o", bin, "./internal/buildinfo/testdata/stamp")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", ldflags, err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "stamp v9.8.7-test (commit 0123456789abcdef, " + runtime.Version() + ")"; string(out) != want {
		t.Errorf("built with %q, the program printed %q, want %q", ldflags, out, want)
	}
}
