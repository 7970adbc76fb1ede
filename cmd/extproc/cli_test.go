package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/buildinfo"
)

func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		r := runFor(t, []string{arg}, env(nil))
		if r.code != 0 || r.stderr != "" {
			t.Errorf("%s: exit %d stderr %q, want 0 and nothing on stderr", arg, r.code, r.stderr)
		}
		for _, want := range []string{"Usage:", "-check-config", "-strict", "-skip-files", "-version", "EXTPROC_CONFIG"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: help lacks %q:\n%s", arg, want, r.stdout)
			}
		}
	}
	// A mistake prints the help on stderr and exits 2.
	r := runFor(t, []string{"--no-such-flag"}, env(nil))
	if r.code != 2 || !strings.Contains(r.stderr, "Usage:") || r.stdout != "" {
		t.Errorf("bad flag: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestVersion(t *testing.T) {
	r := runFor(t, []string{"--version"}, env(nil))
	want := "extproc " + buildinfo.Version() + " (commit " + buildinfo.Commit() + ", " + runtime.Version() + ")\n"
	if r.code != 0 || r.stdout != want {
		t.Errorf("--version: exit %d stdout %q, want 0 and %q", r.code, r.stdout, want)
	}
}

// strictCases are files that load, with warnings that --strict refuses.
var strictCases = []struct {
	name, text, want string
}{
	{"misspelled key", strings.Replace(validConfig, "    on_error: fail\n", "    on_eror: ignore\n", 1),
		`:6: warning: plugin "Guard": on_eror: unknown key, ignored; did you mean "on_error"?`},
	{"empty file", "", ": warning: the file is empty"},
	{"empty plugin list", "plugins: []\n", ":1: warning: plugins: no plugins configured"},
}

func TestCheckConfigStrict(t *testing.T) {
	for _, tt := range strictCases {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, tt.text)
			r := runFor(t, []string{"--config", path, "--check-config"}, env(nil))
			if r.code != 0 || !strings.Contains(r.stdout, path+tt.want) || !strings.Contains(r.stdout, "OK") {
				t.Errorf("without --strict: exit %d stdout %q, want 0, OK and %q", r.code, r.stdout, tt.want)
			}
			r = runFor(t, []string{"--config", path, "--check-config", "--strict"}, env(nil))
			if r.code != 1 || !strings.Contains(r.stderr, path+tt.want) || strings.Contains(r.stdout, "OK") {
				t.Errorf("--strict: exit %d stdout %q stderr %q, want 1 and %q", r.code, r.stdout, r.stderr, tt.want)
			}
		})
	}
	// A clean file passes --strict.
	r := runFor(t, []string{"--config", writeFile(t, validConfig), "--check-config", "--strict"}, env(nil))
	if r.code != 0 || !strings.Contains(r.stdout, "OK (1 plugin, 0 warnings)") {
		t.Errorf("clean file --strict: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestCheckConfigSuggestsHook(t *testing.T) {
	path := writeFile(t, strings.Replace(validConfig, "hooks: [tool_pre_invoke]", "hooks: [tool_pre_invok]", 1))
	r := runFor(t, []string{"--config", path, "--check-config"}, env(nil))
	want := path + `:4: plugin "Guard": hooks[0]: unknown hook "tool_pre_invok"; did you mean "tool_pre_invoke"?`
	if r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d stderr %q, want 1 and %q", r.code, r.stderr, want)
	}
}

func TestCheckConfigSyntaxPosition(t *testing.T) {
	path := writeFile(t, "plugins:\n  - name: p\n    kind: external\n  mode: x\n")
	r := runFor(t, []string{"--config", path, "--check-config"}, env(nil))
	if want := path + ":4:3: did not find expected '-' indicator"; r.code != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d stderr %q, want 1 and %q", r.code, r.stderr, want)
	}
}

// TestCheckConfigSkipFiles: a config naming TLS files that exist only in
// its Pod fails the check here, and passes with --skip-files.
func TestCheckConfigSkipFiles(t *testing.T) {
	path := writeFile(t, strings.Replace(validConfig, "      url: http://127.0.0.1:1/mcp\n",
		"      url: https://127.0.0.1:1/mcp\n      tls:\n        ca_bundle: /etc/mcp-extproc/tls/ca.pem\n", 1))
	r := runFor(t, []string{"--config", path, "--check-config", "--strict"}, env(nil))
	if r.code != 1 || !strings.Contains(r.stderr, "cannot read /etc/mcp-extproc/tls/ca.pem") {
		t.Errorf("without --skip-files: exit %d stderr %q, want 1 and the missing file", r.code, r.stderr)
	}
	r = runFor(t, []string{"--config", path, "--check-config", "--strict", "--skip-files"}, env(nil))
	if r.code != 0 {
		t.Errorf("--skip-files: exit %d stdout %q stderr %q, want 0", r.code, r.stdout, r.stderr)
	}
	// Only with --check-config: the sidecar never starts without its files.
	r = runFor(t, []string{"--config", path, "--skip-files"}, env(nil))
	if r.code != 2 || !strings.Contains(r.stderr, "--check-config only") {
		t.Errorf("--skip-files alone: exit %d stderr %q, want 2", r.code, r.stderr)
	}
}
