package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// The cpu scenario runs each ext_proc target in a process of its own, so
// that the process's CPU time (user + system, from /proc/<pid>/stat) is
// the target's alone, and divides it by the exchanges it served. CPU time
// does not move with the machine's load the way latency does: a target
// that does more work per exchange shows it at any load.
//
// The child is the running binary itself (cmd/bench, or internal/bench's
// test binary) started with ChildEnv set: [ServeChild] serves the target.

// Environment of a child process of the cpu scenario.
const (
	// ChildEnv names the target the process serves instead of measuring:
	// "sidecar" or "nothing", or "stdio-plugin": a plugin server on stdin
	// and stdout (the transports scenario's STDIO row).
	ChildEnv = "MCP_EXTPROC_BENCH_CHILD"
	// ChildConfigEnv holds the sidecar's cpex YAML config.
	ChildConfigEnv = "MCP_EXTPROC_BENCH_CHILD_CONFIG"
	// ChildProfileEnv, when set, names a folder where each child writes a
	// CPU profile of its whole life, <target>-<pid>.pprof: what the
	// sidecar spent its CPU per exchange on, in its own process.
	ChildProfileEnv = "MCP_EXTPROC_BENCH_CHILD_CPUPROFILE"
)

// ServeChild serves the target that ChildEnv names: it writes the target's
// gRPC address as one line to stdout, then serves until stdin reaches its
// end (the parent closed it, or exited) or ctx is done. A stdio-plugin
// child writes no address: it speaks MCP on stdin and stdout until stdin
// ends.
func ServeChild(ctx context.Context, stdin io.Reader, stdout io.Writer) (err error) {
	kind := os.Getenv(ChildEnv)
	if dir := os.Getenv(ChildProfileEnv); dir != "" {
		stop, perr := profileCPU(filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", kind, os.Getpid())))
		if perr != nil {
			return perr
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	var ep *Endpoint
	switch kind {
	case stdioPluginChild: // MCP on stdin and stdout: no address to print
		return serveStdioPlugin(ctx, stdin, stdout)
	case "sidecar":
		ep, err = StartSidecar(ctx, "sidecar", os.Getenv(ChildConfigEnv))
	case "nothing":
		ep, err = Serve("nothing", NewNothing())
	default:
		return fmt.Errorf("%s=%q: want sidecar, nothing or %s", ChildEnv, kind, stdioPluginChild)
	}
	if err != nil {
		return err
	}
	if _, err := fmt.Fprintln(stdout, ep.Addr); err != nil {
		return errors.Join(err, ep.Close())
	}
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, stdin)
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	return ep.Close()
}

// profileCPU starts a CPU profile into path; stop ends it and closes the
// file.
func profileCPU(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("child profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(fmt.Errorf("child profile: %w", err), f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// childTarget is a target served by a child process.
type childTarget struct {
	*Endpoint
	cmd   *exec.Cmd
	stdin io.Closer
}

// startChild starts the running binary as a child serving kind (with the
// sidecar config yaml) and dials it.
func startChild(ctx context.Context, kind, yaml string) (*childTarget, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("child: %w", err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), ChildEnv+"="+kind, ChildConfigEnv+"="+yaml)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("child: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("child: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("child %s: %w", kind, err)
	}
	stop := func() error {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return errors.Join(fmt.Errorf("child %s did not stop", kind), cmd.Process.Kill())
		}
	}
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		addr <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	var a string
	select {
	case a = <-addr:
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), stop())
	case <-time.After(60 * time.Second):
		return nil, errors.Join(fmt.Errorf("child %s did not start", kind), stop())
	}
	if a == "" {
		err := stop()
		return nil, fmt.Errorf("child %s: %v: %s", kind, err, stderr.Bytes())
	}
	client, conn, err := dial(a)
	if err != nil {
		return nil, errors.Join(err, stop())
	}
	ep := &Endpoint{Name: kind, Client: client, Addr: a, close: func() error { return errors.Join(conn.Close(), stop()) }}
	return &childTarget{Endpoint: ep, cmd: cmd, stdin: stdin}, nil
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// cpuTime returns the user + system CPU time of the process pid so far.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("cpu time: %w", err)
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("cpu time: /proc/<pid>/stat unreadable")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("cpu time: /proc/<pid>/stat too short")
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("cpu time: %w", err)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// cpuRun is one target's share of a cpu measurement.
type cpuRun struct {
	cpu       time.Duration
	exchanges int64
}

// perExchange is the CPU time per exchange.
func (c cpuRun) perExchange() time.Duration {
	if c.exchanges == 0 {
		return 0
	}
	return c.cpu / time.Duration(c.exchanges)
}

// loadCPU runs op on workers concurrent streams for d and adds the CPU
// time the child spent (start-up excluded) and the exchanges to acc.
func loadCPU(ctx context.Context, t *childTarget, op Op, workers int, d time.Duration, acc *cpuRun) error {
	before, err := cpuTime(t.cmd.Process.Pid)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var n atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if _, err := op(context.WithoutCancel(ctx)); err != nil {
					errs[w] = err
					cancel()
					return
				}
				n.Add(1)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	after, err := cpuTime(t.cmd.Process.Pid)
	if err != nil {
		return err
	}
	acc.cpu += after - before
	acc.exchanges += n.Load()
	return nil
}

// cpuScenario: CPU per exchange of the sidecar and of the do-nothing
// server, each in its own process, for the shapes users deploy:
// passthrough and one plugin call, with and without Envoy's MCP-filter
// metadata.
func (r *runner) cpuScenario(ctx context.Context) (err error) {
	var cl closers
	defer func() { err = errors.Join(err, cl.close()) }()
	guard, err := StartPlugin(DelayPlugin("Guard", 0, cpex.ToolPreInvoke))
	if err != nil {
		return err
	}
	cl.add(guard)
	sc, err := startChild(ctx, "sidecar", SidecarConfig(0, PluginSpec{Name: "Guard", URL: guard.URL, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}))
	if err != nil {
		return err
	}
	cl.add(sc)
	none, err := startChild(ctx, "nothing", "")
	if err != nil {
		return err
	}
	cl.add(none)
	w, err := r.workloads()
	if err != nil {
		return err
	}
	shapes := []struct {
		name  string
		x     *Exchange
		mcp   bool
		calls int64
	}{
		{"passthrough tools/list, no MCP-filter metadata", w.list, false, 0},
		{"passthrough tools/list, MCP-filter metadata", w.list, true, 0},
		{"one plugin tools/call, no MCP-filter metadata", w.call, false, 1},
		{"one plugin tools/call, MCP-filter metadata", w.call, true, 1},
	}
	t := Table{
		Title:  fmt.Sprintf("12. CPU per exchange: the sidecar and the do-nothing server, each in its own process, %d concurrent streams", r.cpuStreams),
		Header: []string{"exchange", "msgs sc/none", "sidecar CPU/exch", "nothing CPU/exch", "ratio", "exchanges sc", "none"},
		Notes: []string{
			"CPU: the process's user + system time (/proc/<pid>/stat, 10 ms ticks) over the measured rounds, start-up and warm-up excluded, divided by the exchanges it served. The driver and the plugin server run in the bench process, so their CPU is in neither column; the one plugin rows' sidecar column includes its MCP client of the plugin.",
			"sidecar: internal/sidecar.Run, one plugin on tool_pre_invoke (the passthrough rows' tools/list is not hooked); nothing: CONTINUE to everything, Envoy's default modes.",
			"MCP-filter metadata: metadata_context carries what Envoy's MCP filter (envoy.filters.http.mcp) read from the body, as on Envoy 1.37+ with the filter before ext_proc.",
		},
	}
	d := &Driver{}
	for _, s := range shapes {
		p := Prepare(s.x)
		if s.mcp {
			if err := forwardMCPFilterMetadata(p); err != nil {
				return err
			}
		}
		ok := untouched(p)
		msgs, err := messages(ctx, d, p, ok, sc.Endpoint, none.Endpoint)
		if err != nil {
			return err
		}
		var scRun, noneRun cpuRun
		before := guard.Calls()
		targets := []struct {
			t   *childTarget
			acc *cpuRun
		}{{sc, &scRun}, {none, &noneRun}}
		for round := range r.cpuRounds + 1 { // round 0 warms up
			for i := range targets {
				tg := targets[(i+round)%len(targets)]
				acc := tg.acc
				if round == 0 {
					acc = &cpuRun{}
				}
				if err := loadCPU(ctx, tg.t, exchangeOp(d, tg.t.Endpoint, p, ok), r.cpuStreams, r.cpuDuration, acc); err != nil {
					return fmt.Errorf("%s on %s: %w", s.name, tg.t.Name, err)
				}
			}
		}
		// Every sidecar exchange of a plugin shape called the plugin once.
		if s.calls > 0 && guard.Calls()-before < scRun.exchanges {
			return fmt.Errorf("%s: %d plugin calls for at least %d exchanges", s.name, guard.Calls()-before, scRun.exchanges)
		}
		ratioCPU := 0.0
		if noneRun.perExchange() > 0 {
			ratioCPU = float64(scRun.perExchange()) / float64(noneRun.perExchange())
		}
		t.Rows = append(t.Rows, []string{s.name, fmt.Sprintf("%d/%d", msgs[0], msgs[1]),
			cpuDur(scRun.perExchange()), cpuDur(noneRun.perExchange()), ratio(ratioCPU),
			strconv.FormatInt(scRun.exchanges, 10), strconv.FormatInt(noneRun.exchanges, 10)})
		r.logf("cpu %s: sidecar %s, nothing %s per exchange", s.name, cpuDur(scRun.perExchange()), cpuDur(noneRun.perExchange()))
	}
	r.rep.Tables = append(r.rep.Tables, t)
	return nil
}

// cpuDur prints a CPU time per exchange in µs.
func cpuDur(d time.Duration) string {
	return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond))
}
