package sidecar_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// The STDIO tests run this test binary itself as the plugin server child:
// with stdioChildEnv set, TestMain calls stdioChild instead of running
// tests.
const (
	stdioChildEnv = "SIDECAR_TEST_STDIO_CHILD"
	stdioPidsEnv  = "SIDECAR_TEST_STDIO_PIDS" // file the child writes its pid and its grandchild's to
)

// stdioChild serves plugin StdioGuard (blocks the tool danger3) on
// stdin/stdout, after starting a grandchild (sleep) in its process group
// that outlives it unless the group is killed. It writes "CHILD GRANDCHILD"
// to the pids file.
func stdioChild() int {
	gc := exec.Command("sleep", "300")
	if err := gc.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	line := fmt.Sprintf("%d %d\n", os.Getpid(), gc.Process.Pid)
	if err := os.WriteFile(os.Getenv(stdioPidsEnv), []byte(line), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	guard := plugintest.NewScripted("StdioGuard", cpex.ToolPreInvoke)
	guard.SetFunc(byTool(map[string]pluginserver.HookFunc{
		"danger3": plugintest.Block(cpex.PluginViolation{Reason: "denied", Description: "danger3 is denied", Code: "DENY3"}),
	}))
	if err := pluginserver.New(guard).Serve(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// stdioEntry renders plugin StdioGuard as a STDIO plugin running this
// test binary; pids is the file the child writes its pids to.
func stdioEntry(t *testing.T, pids string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`  - name: StdioGuard
    kind: external
    hooks: [tool_pre_invoke]
    mode: sequential
    on_error: fail
    mcp:
      proto: STDIO
      cmd: [%s, "-test.run=^$"]
      env: {%s: "1", %s: %s}
      cwd: %s
      reconnect_attempts: 1
      reconnect_delay: 0.05
`, strconv.Quote(exe), stdioChildEnv, stdioPidsEnv, strconv.Quote(pids), strconv.Quote(filepath.Dir(pids)))
}

// stdioPids waits until the child has written its pids file and returns
// the child's pid and its grandchild's.
func stdioPids(t *testing.T, path string) (child, grandchild int) {
	t.Helper()
	eventually(t, "the STDIO child's pids", func() (bool, string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		if _, err := fmt.Sscanf(string(b), "%d %d\n", &child, &grandchild); err != nil {
			return false, fmt.Sprintf("%q: %v", b, err)
		}
		return true, ""
	})
	return child, grandchild
}

// procState returns the state letter of process pid from /proc (R, S, Z,
// ...) and its process group; ok is false when there is no such process.
func procState(pid int) (state byte, pgrp int, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid pgrp ...: comm may hold spaces and ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, false
	}
	pgrp, err = strconv.Atoi(f[2])
	if err != nil {
		return 0, 0, false
	}
	return f[0][0], pgrp, true
}

// groupRunning returns the processes of group pgid that still run. A
// zombie does not run: a grandchild killed after its parent is left to
// PID 1, which reaps it whenever it gets to it (or, in some containers,
// never).
func groupRunning(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc to look for the process group in: %v", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, pg, ok := procState(pid); ok && pg == pgid && st != 'Z' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitStdioGone waits until the child is gone, reaped by the sidecar that
// started it (signal 0 to it fails with ESRCH), and nothing of its process
// group runs.
func waitStdioGone(t *testing.T, child, grandchild int) {
	t.Helper()
	eventually(t, "the STDIO child and its process group gone", func() (bool, string) {
		if err := syscall.Kill(child, 0); !errors.Is(err, syscall.ESRCH) {
			return false, fmt.Sprintf("child %d: signal 0: %v", child, err)
		}
		if left := groupRunning(t, child); len(left) != 0 {
			return false, fmt.Sprintf("group %d still runs %v (grandchild %d)", child, left, grandchild)
		}
		return true, ""
	})
}

// startStdioSidecar starts a sidecar whose config dir holds the config
// with StdioGuard (and HTTP plugin Guard) and waits until both serve, with
// StdioGuard blocking danger3. It returns the sidecar, the config dir, the
// config without StdioGuard, and the child's and grandchild's pids, both
// running. A removed plugin is closed 100 ms (plus the hook timeout) after
// the reload that removed it.
func startStdioSidecar(t *testing.T) (sc *running, dir *configMapDir, without string, child, grandchild int) {
	t.Helper()
	guard := plugintest.NewScripted("Guard", cpex.ToolPreInvoke)
	srv := plugintest.StartPlugins(t, plugintest.GoSDK, nil, guard)
	pids := filepath.Join(t.TempDir(), "pids")
	without = configYAML(pluginEntry("Guard", srv.URL(), "fail", ""))
	dir = newConfigMapDir(t, configYAML(pluginEntry("Guard", srv.URL(), "fail", ""), stdioEntry(t, pids)))
	sc = startSidecar(t, dir.path(), func(o *sidecar.Options) { o.GracePeriod = 100 * time.Millisecond })
	sc.waitReady("Guard", "StdioGuard")
	blockedBy(t, sc.call("danger3", nil), "StdioGuard")
	child, grandchild = stdioPids(t, pids)
	for _, pid := range []int{child, grandchild} {
		if st, pg, ok := procState(pid); !ok || st == 'Z' || pg != child {
			t.Fatalf("process %d: state %q, group %d, found %v; want it running in group %d", pid, st, pg, ok, child)
		}
	}
	return sc, dir, without, child, grandchild
}

// TestStdioChildGoneAfterReload: a reload that removes a STDIO plugin
// stops its child, and what the child started, once the old config is
// retired; the plugin is no longer consulted.
func TestStdioChildGoneAfterReload(t *testing.T) {
	sc, dir, without, child, grandchild := startStdioSidecar(t)
	dir.swap(without)
	sc.waitMetric(1, "mcp_extproc_config_reloads_total", "result", "applied")
	passed(t, sc.call("danger3", nil))
	waitStdioGone(t, child, grandchild)
	passed(t, sc.call("safe", nil))
}

// TestStdioChildGoneAfterShutdown: the sidecar's shutdown (its context
// ending, as SIGTERM ends it in cmd/extproc) stops the STDIO child and
// what the child started.
func TestStdioChildGoneAfterShutdown(t *testing.T) {
	sc, _, _, child, grandchild := startStdioSidecar(t)
	if err := sc.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	waitStdioGone(t, child, grandchild)
}
