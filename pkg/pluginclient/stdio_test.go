package pluginclient

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// The STDIO tests run this test binary itself as the plugin server child:
// with stdioChildEnv set, TestMain serves pkg/pluginserver's plugins on
// stdin/stdout instead of running tests.
const (
	stdioChildEnv = "PLUGINCLIENT_STDIO_CHILD"
	stdioPidsEnv  = "PLUGINCLIENT_STDIO_PIDS"  // file the child appends its pid (and its grandchild's) to
	stdioCountEnv = "PLUGINCLIENT_STDIO_COUNT" // file the child appends one line per fault attempt to
	stdioGrandEnv = "PLUGINCLIENT_STDIO_GRANDCHILD"
	stdioStubEnv  = "PLUGINCLIENT_STDIO_STUBBORN" // ignore SIGTERM and stdin's end
	// stdioTracesEnv names the file plugin "tracer" appends the trace
	// context of each call to (pluginserver.CallTrace as JSON, a line each).
	stdioTracesEnv = "PLUGINCLIENT_STDIO_TRACES"
)

func TestMain(m *testing.M) {
	if os.Getenv(stdioChildEnv) != "" {
		os.Exit(stdioChild())
	}
	os.Exit(m.Run())
}

// stdioChild is the plugin server child: plugins "guard" (blocks
// "forbidden", redacts "secret") and "faulty" (markDrop: exits mid-call;
// markBlock: blocks), both counting their fault attempts in the count file.
func stdioChild() int {
	appendLine(os.Getenv(stdioPidsEnv), strconv.Itoa(os.Getpid()))
	if os.Getenv(stdioGrandEnv) != "" {
		gc := exec.Command("sleep", "300")
		if err := gc.Start(); err == nil {
			appendLine(os.Getenv(stdioPidsEnv), strconv.Itoa(gc.Process.Pid))
		}
	}
	fmt.Fprintln(os.Stderr, "stdio child serving")
	if os.Getenv(stdioStubEnv) != "" {
		signal.Ignore(syscall.SIGTERM)
	}
	count := func() { appendLine(os.Getenv(stdioCountEnv), "attempt") }
	guard := guardPlugin()
	faulty := pluginserver.Func(pluginserver.Config{Name: "faulty", Hooks: []cpex.HookType{cpex.ToolPreInvoke}},
		func(_ context.Context, _ cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			switch {
			case bytes.Contains(payload, []byte(markDrop)):
				count()
				os.Exit(3)
			case bytes.Contains(payload, []byte(markBlock)):
				count()
				return pluginserver.Block("faulty", cpex.PluginViolation{Reason: "blocked", Description: "d", Code: "X"}), nil
			}
			return pluginserver.Continue("faulty"), nil
		})
	tracer := pluginserver.Func(pluginserver.Config{Name: "tracer", Hooks: []cpex.HookType{cpex.ToolPreInvoke}},
		func(ctx context.Context, _ cpex.HookType, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			b, err := json.Marshal(pluginserver.CallTraceFrom(ctx))
			if err != nil {
				return nil, err
			}
			appendLine(os.Getenv(stdioTracesEnv), string(b))
			return pluginserver.Continue("tracer"), nil
		})
	srv := pluginserver.New(guard, faulty, tracer)
	if err := srv.Serve(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv(stdioStubEnv) != "" {
		time.Sleep(time.Minute) // until SIGKILL
	}
	return 0
}

// guardPlugin blocks "forbidden" and redacts "secret" in tool_pre_invoke.
func guardPlugin() pluginserver.Plugin {
	return pluginserver.Func(pluginserver.Config{Name: "guard", Hooks: []cpex.HookType{cpex.ToolPreInvoke}},
		func(_ context.Context, _ cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			switch {
			case bytes.Contains(payload, []byte("forbidden")):
				return pluginserver.Block("guard", cpex.PluginViolation{Reason: "forbidden", Description: "d", Code: "DENY"}), nil
			case bytes.Contains(payload, []byte("secret")):
				var p cpex.ToolPreInvokePayload
				if err := json.Unmarshal(payload, &p); err != nil {
					return nil, err
				}
				p.Args = bytes.ReplaceAll(p.Args, []byte("secret"), []byte("[redacted]"))
				return pluginserver.Modify("guard", p)
			}
			return pluginserver.Continue("guard"), nil
		})
}

func appendLine(path, line string) {
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// stdioRig is a STDIO plugin config running this test binary, and the
// files its children write.
type stdioRig struct {
	pids, count string
}

func newStdioRig(t *testing.T, name string, env map[string]string) (config.Plugin, stdioRig) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rig := stdioRig{pids: filepath.Join(dir, "pids"), count: filepath.Join(dir, "count")}
	e := map[string]string{stdioChildEnv: "1", stdioPidsEnv: rig.pids, stdioCountEnv: rig.count}
	for k, v := range env {
		e[k] = v
	}
	pl := config.Plugin{Name: name, Kind: config.KindExternal, MCP: &config.MCP{
		Proto: config.ProtoSTDIO, Cmd: []string{exe, "-test.run=^$"}, Env: e, Cwd: dir,
		ReconnectAttempts: ptr(10), ReconnectDelay: secs(20 * time.Millisecond),
	}}
	return pl, rig
}

// alive reports whether process pid runs: it exists and is not a zombie
// (a grandchild killed after its parent is reaped by PID 1, whenever that
// gets to it).
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...: the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// livePids returns the pids of the rig's file that still run.
func (r stdioRig) livePids(t *testing.T) []int {
	var live []int
	for _, l := range readLines(t, r.pids) {
		pid, err := strconv.Atoi(l)
		if err == nil && alive(pid) {
			live = append(live, pid)
		}
	}
	return live
}

// latestPid is the pid of the child started last.
func (r stdioRig) latestPid(t *testing.T) int {
	lines := readLines(t, r.pids)
	if len(lines) == 0 {
		t.Fatal("no child started")
	}
	pid, err := strconv.Atoi(lines[len(lines)-1])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func invokeText(p *Pool, plugin, text string) (*cpex.InvokeHookReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	payload, _ := json.Marshal(cpex.ToolPreInvokePayload{Name: "echo", Args: json.RawMessage(`{"text":` + strconv.Quote(text) + `}`)})
	return p.Invoke(ctx, plugin, cpex.ToolPreInvoke, payload, testContext("req-1"))
}

// redactUnderLoad runs 20 callers of pool's plugin "guard" (each call
// must come back redacted) while disrupt runs three times, 300 ms apart,
// and fails the test on any failed call. It returns the calls made.
func redactUnderLoad(t *testing.T, pool *Pool, disrupt func()) int64 {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var calls, failed atomic.Int64
	var firstErr atomic.Pointer[error]
	for i := range 20 {
		wg.Go(func() {
			for ctx.Err() == nil {
				r, err := invokeText(pool, "guard", fmt.Sprintf("caller %d secret", i))
				calls.Add(1)
				if err == nil && (r.Result == nil || !strings.Contains(string(r.Result.ModifiedPayload), "[redacted]")) {
					err = fmt.Errorf("unexpected reply %+v", r)
				}
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	for range 3 {
		time.Sleep(300 * time.Millisecond)
		disrupt()
	}
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d calls failed; first: %v", n, calls.Load(), *firstErr.Load())
	}
	return calls.Load()
}

// checkPolicy runs allow, block and redact through plugin.
func checkPolicy(t *testing.T, pool *Pool, plugin string) {
	t.Helper()
	r, err := invokeText(pool, plugin, "hello")
	if err != nil || r.Result == nil || !r.Result.Continue() || r.Result.Modified() {
		t.Fatalf("allow: %+v, %v", r, err)
	}
	r, err = invokeText(pool, plugin, "a forbidden word")
	if err != nil || r.Result == nil || r.Result.Continue() || r.Result.Violation == nil {
		t.Fatalf("block: %+v, %v", r, err)
	}
	r, err = invokeText(pool, plugin, "my secret")
	if err != nil || r.Result == nil || !r.Result.Continue() {
		t.Fatalf("redact: %+v, %v", r, err)
	}
	if got := string(r.Result.ModifiedPayload); !strings.Contains(got, "[redacted]") || strings.Contains(got, "secret") {
		t.Fatalf("redact: modified payload %s", got)
	}
}

// TestStdioPolicy: a pkg/pluginserver plugin server started by the client
// as a child allows, blocks and redacts; its stderr reaches the log; and
// after Close neither it nor what it started is left.
func TestStdioPolicy(t *testing.T) {
	pl, rig := newStdioRig(t, "guard", map[string]string{stdioGrandEnv: "1"})
	pool := newPool(t, []config.Plugin{pl}, Options{})
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	checkPolicy(t, pool, "guard")
	if live := rig.livePids(t); len(live) != 2 {
		t.Fatalf("want the child and its grandchild running, got pids %v", live)
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := pool.Close(closeCtx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if live := rig.livePids(t); len(live) != 0 {
		t.Fatalf("processes left after Close: %v", live)
	}
}

// TestStdioStubbornChild: a child that ignores its stdin's end and SIGTERM
// is killed, group and all.
func TestStdioStubbornChild(t *testing.T) {
	pl, rig := newStdioRig(t, "guard", map[string]string{stdioStubEnv: "1", stdioGrandEnv: "1"})
	pool := newPool(t, []config.Plugin{pl}, Options{})
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	mustInvoke(t, pool, "guard")
	start := time.Now()
	closeCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := pool.Close(closeCtx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if live := rig.livePids(t); len(live) != 0 {
		t.Fatalf("processes left after Close: %v", live)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Errorf("Close took %v: the stubborn child was not given its grace", d)
	}
}

// TestStdioKilledUnderLoad: 20 callers; the child is killed (SIGKILL to its
// group) several times; no call fails, and a new child serves each time.
func TestStdioKilledUnderLoad(t *testing.T) {
	pl, rig := newStdioRig(t, "guard", nil)
	killedUnderLoad(t, pl, rig)
}

// killedUnderLoad runs 20 callers of pl's plugin "guard" and kills its
// child three times.
func killedUnderLoad(t *testing.T, pl config.Plugin, rig stdioRig) {
	rec := &recorder{}
	pool := newPool(t, []config.Plugin{pl}, Options{Observer: rec})
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })

	const kills = 3
	calls := redactUnderLoad(t, pool, func() {
		pid, connects := rig.latestPid(t), pool.Stats("guard").Connects
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill child group %d: %v", pid, err)
		}
		eventually(t, "a new child connected", func() bool {
			return rig.latestPid(t) != pid && pool.Stats("guard").Connects > connects
		})
	})
	if got := len(readLines(t, rig.pids)); got < kills+1 {
		t.Errorf("%d children started, want at least %d", got, kills+1)
	}
	if rec.rebuilds.Load() < kills {
		t.Errorf("%d rebuilds, want at least %d", rec.rebuilds.Load(), kills)
	}
	t.Logf("%d calls, %d children, %d rebuilds, %d retries", calls, len(readLines(t, rig.pids)), rec.rebuilds.Load(), rec.retriesOK.Load())
}

// TestStdioExitedIdleRestarts: a child that exits while no call is in
// flight is restarted without waiting for a call.
func TestStdioExitedIdleRestarts(t *testing.T) {
	pl, rig := newStdioRig(t, "guard", nil)
	pool := newPool(t, []config.Plugin{pl}, Options{})
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	pid := rig.latestPid(t)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a new child", func() bool { return rig.latestPid(t) != pid })
	eventually(t, "ready", func() bool { return pool.State("guard") == Ready })
	checkPolicy(t, pool, "guard")
}
