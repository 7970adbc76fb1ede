package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-extproc/mcp-extproc/internal/syncbuf"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait; reaching it fails the test.
const waitTimeout = 15 * time.Second

const validConfig = `plugins:
  - name: Guard
    kind: external
    hooks: [tool_pre_invoke]
    mode: sequential
    on_error: fail
    mcp:
      proto: STREAMABLEHTTP
      url: http://127.0.0.1:1/mcp
plugin_settings:
  plugin_timeout: 2
  plugin_health_check_interval: 3600
`

// badConfig has three problems in three plugins: an unsupported kind, a
// missing mcp.url and an unknown on_error.
const badConfig = `plugins:
  - name: Bogus
    kind: bogus
    hooks: [tool_pre_invoke]
  - name: NoURL
    kind: external
    hooks: [tool_pre_invoke]
    mcp:
      proto: STREAMABLEHTTP
  - name: Typo
    kind: external
    hooks: [tool_pre_invoke]
    on_error: sometimes
    mcp:
      proto: STREAMABLEHTTP
      url: http://127.0.0.1:1/mcp
`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugins.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

// result is what one run returned and printed.
type result struct {
	code           int
	stdout, stderr string
}

// runFor calls run with a context that ends only after run returned (or
// after waitTimeout, failing the test): a run that starts the sidecar
// instead of exiting is caught.
func runFor(t *testing.T, args []string, getenv func(string) string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, getenv, &stdout, &stderr) }()
	select {
	case code := <-done:
		return result{code, stdout.String(), stderr.String()}
	case <-time.After(waitTimeout):
		cancel()
		<-done
		t.Fatalf("run %q did not exit; stderr:\n%s", args, stderr.String())
		return result{}
	}
}

// problems returns what config.Load reports about path, and checks that it
// names the problems badConfig was written with.
func problems(t *testing.T, path string) []config.Problem {
	t.Helper()
	_, err := config.Load(path)
	var verr *config.ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("config.Load(bad) = %v, want a *config.ValidationError", err)
	}
	want := map[[2]string]bool{{"Bogus", "kind"}: false, {"NoURL", "mcp.url"}: false, {"Typo", "on_error"}: false}
	for _, p := range verr.Problems {
		if _, ok := want[[2]string{p.Plugin, p.Field}]; ok {
			want[[2]string{p.Plugin, p.Field}] = true
		}
	}
	for k, found := range want {
		if !found {
			t.Errorf("no problem reported for plugin %s field %s; got %v", k[0], k[1], verr.Problems)
		}
	}
	return verr.Problems
}

// hasEvery fails the test unless out shows every problem with its file,
// line, plugin and field.
func hasEvery(t *testing.T, out, path string, ps []config.Problem) {
	t.Helper()
	for _, p := range ps {
		if p.Line == 0 {
			t.Errorf("problem %q has no line", p)
		}
		if want := fmt.Sprintf("%s:%d: %s", path, p.Line, p.Text()); !strings.Contains(out, want) {
			t.Errorf("output lacks problem %q:\n%s", want, out)
		}
		if p.Plugin != "" && !strings.Contains(out, `plugin "`+p.Plugin+`"`) {
			t.Errorf("output does not name plugin %s:\n%s", p.Plugin, out)
		}
	}
}

func TestCheckConfig(t *testing.T) {
	bad := writeFile(t, badConfig)
	good := writeFile(t, validConfig)
	ps := problems(t, bad)
	if !strings.Contains(badConfig, "kind: bogus") {
		t.Fatal("test data lost its unsupported kind")
	}

	t.Run("invalid", func(t *testing.T) {
		r := runFor(t, []string{"--config", bad, "--check-config"}, env(nil))
		if r.code != 1 {
			t.Errorf("exit %d, want 1", r.code)
		}
		hasEvery(t, r.stderr, bad, ps)
		if !strings.Contains(r.stderr, `"bogus"`) {
			t.Errorf("the unsupported kind is not named:\n%s", r.stderr)
		}
		if strings.Contains(r.stdout, "OK") {
			t.Errorf("stdout says OK for an invalid file: %q", r.stdout)
		}
	})
	t.Run("valid", func(t *testing.T) {
		r := runFor(t, []string{"--config", good, "--check-config"}, env(nil))
		if r.code != 0 || !strings.Contains(r.stdout, good) || !strings.Contains(r.stdout, "OK") || r.stderr != "" {
			t.Errorf("got exit %d stdout %q stderr %q, want 0 and OK", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("env", func(t *testing.T) {
		r := runFor(t, []string{"--check-config"}, env(map[string]string{"EXTPROC_CONFIG": good}))
		if r.code != 0 || !strings.Contains(r.stdout, good) {
			t.Errorf("EXTPROC_CONFIG=good: exit %d stdout %q stderr %q, want 0", r.code, r.stdout, r.stderr)
		}
		r = runFor(t, []string{"--check-config"}, env(map[string]string{"EXTPROC_CONFIG": bad}))
		if r.code != 1 {
			t.Errorf("EXTPROC_CONFIG=bad: exit %d, want 1", r.code)
		}
		hasEvery(t, r.stderr, bad, ps)
		// A flag on the command line wins over the environment.
		r = runFor(t, []string{"--check-config", "--config", good}, env(map[string]string{"EXTPROC_CONFIG": bad}))
		if r.code != 0 {
			t.Errorf("--config good with EXTPROC_CONFIG=bad: exit %d stderr %q, want 0", r.code, r.stderr)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope.yaml")
		r := runFor(t, []string{"--config", missing, "--check-config"}, env(nil))
		if r.code != 1 || !strings.Contains(r.stderr, missing) {
			t.Errorf("exit %d stderr %q, want 1 naming the file", r.code, r.stderr)
		}
	})
	t.Run("no config", func(t *testing.T) {
		r := runFor(t, []string{"--check-config"}, env(nil))
		if r.code != 2 || !strings.Contains(r.stderr, "EXTPROC_CONFIG") {
			t.Errorf("exit %d stderr %q, want 2 asking for --config", r.code, r.stderr)
		}
	})
}

// TestInvalidConfigStartsNothing: without --check-config an invalid file
// exits 1 with the same messages, and nothing is started (run returns
// while its context is still live).
func TestInvalidConfigStartsNothing(t *testing.T) {
	bad := writeFile(t, badConfig)
	ps := problems(t, bad)
	check := runFor(t, []string{"--config", bad, "--check-config"}, env(nil))
	r := runFor(t, []string{"--config", bad, "--grpc-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0"}, env(nil))
	if r.code != 1 {
		t.Errorf("exit %d, want 1", r.code)
	}
	hasEvery(t, r.stderr, bad, ps)
	lines := strings.Split(strings.TrimSpace(check.stderr), "\n")
	for _, line := range lines[:len(lines)-1] { // all but the count
		if !strings.Contains(r.stderr, line) {
			t.Errorf("--check-config printed %q, the failed start did not:\n%s", line, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "started") {
		t.Errorf("the sidecar started on an invalid config:\n%s", r.stderr)
	}
}

// TestRunStartsAndStops: a valid config starts the sidecar (flags from the
// environment), SIGHUP reloads its config, and it stops with exit 0 when its
// context ends.
func TestRunStartsAndStops(t *testing.T) {
	good := writeFile(t, validConfig)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, nil, env(map[string]string{
			"EXTPROC_CONFIG":     good,
			"EXTPROC_GRPC_ADDR":  "127.0.0.1:0",
			"EXTPROC_ADMIN_ADDR": "127.0.0.1:0",
			"EXTPROC_LOG_LEVEL":  "info",
		}), &stdout, &stderr)
	}()
	deadline := time.Now().Add(waitTimeout)
	for !strings.Contains(stderr.String(), "mcp-extproc started") {
		select {
		case code := <-done:
			t.Fatalf("run exited %d before starting:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("sidecar did not start:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// SIGHUP reloads the file even though it did not change (polling only
	// reloads a changed file, so this reload can only come from the signal).
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(stderr.String(), "config reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("SIGHUP did not reload the config:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after shutdown, want 0:\n%s", code, stderr.String())
		}
	case <-time.After(waitTimeout):
		t.Fatal("run did not return after its context ended")
	}
}

func TestBadFlags(t *testing.T) {
	good := writeFile(t, validConfig)
	for _, args := range [][]string{
		{"--config", good, "--log-level", "loud"},
		{"--config", good, "--no-such-flag"},
		{"--config", good, "stray-argument"},
	} {
		if r := runFor(t, args, env(nil)); r.code != 2 {
			t.Errorf("run %q: exit %d, want 2 (stderr %q)", args, r.code, r.stderr)
		}
	}
	if r := runFor(t, []string{"--config", good}, env(map[string]string{"EXTPROC_LOG_LEVEL": "loud"})); r.code != 2 {
		t.Errorf("EXTPROC_LOG_LEVEL=loud: exit %d, want 2 (stderr %q)", r.code, r.stderr)
	}
}
