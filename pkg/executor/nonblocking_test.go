package executor

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// nonBlockingFake is a fake whose plugins named in nb cannot block, as the
// sidecar's plugin set says of the built-ins that only compute.
type nonBlockingFake struct {
	*fake
	nb map[string]bool

	mu      sync.Mutex
	viaPool []string // the plugins called through Invoke
	direct  []string // the plugins called as LocalPlugin
}

func (f *nonBlockingFake) NonBlocking(plugin string) LocalPlugin {
	if !f.nb[plugin] {
		return nil
	}
	return fakeLocal{f}
}

func (f *nonBlockingFake) Invoke(ctx context.Context, plugin string, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	f.mu.Lock()
	f.viaPool = append(f.viaPool, plugin)
	f.mu.Unlock()
	return f.fake.Invoke(ctx, plugin, hook, payload, pctx)
}

// fakeLocal is a plugin of the fake called directly, as the executor calls
// one that cannot block.
type fakeLocal struct{ f *nonBlockingFake }

func (l fakeLocal) InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	l.f.mu.Lock()
	l.f.direct = append(l.f.direct, plugin)
	l.f.mu.Unlock()
	return l.f.fake.Invoke(ctx, plugin, hook, payload, pctx)
}

func newNonBlockingExec(t *testing.T, f *fake, nb []string, opts Options) *Executor {
	t.Helper()
	set := map[string]bool{}
	for _, n := range nb {
		set[n] = true
	}
	e := New(&nonBlockingFake{fake: f, nb: set}, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// A plugin that cannot block is called directly, as the LocalPlugin its
// Plugins hand over, every other one through Plugins.Invoke.
func TestNonBlockingCalledDirectly(t *testing.T) {
	f := newFake(plug("inline", config.ModeSequential, 1), plug("remote", config.ModeSequential, 2))
	nb := &nonBlockingFake{fake: f, nb: map[string]bool{"inline": true}}
	e := New(nb, Options{})
	defer e.Close(context.Background())
	for range 2 {
		if out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{}); out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	if diff := cmp.Diff([]string{"inline", "inline"}, nb.direct); diff != "" {
		t.Errorf("called directly: %s", diff)
	}
	if diff := cmp.Diff([]string{"remote", "remote"}, nb.viaPool); diff != "" {
		t.Errorf("called through Plugins.Invoke: %s", diff)
	}
}

// A plugin that cannot block is called with the hook's deadline, not one
// of its own; every other plugin gets its plugin_timeout.
func TestNonBlockingHasNoTimer(t *testing.T) {
	f := newFake(plug("inline", config.ModeSequential, 1), plug("remote", config.ModeSequential, 2))
	deadlines := map[string]time.Time{}
	record := func(name string) handler {
		return func(ctx context.Context, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			d, ok := ctx.Deadline()
			if !ok {
				t.Errorf("%s: no deadline", name)
			}
			deadlines[name] = d
			return okH()(ctx, nil, nil)
		}
	}
	f.set("inline", record("inline"))
	f.set("remote", record("remote"))
	e := newNonBlockingExec(t, f, []string{"inline"}, Options{
		Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(time.Second)}, HookTimeout: time.Hour})
	start := time.Now()
	if out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{}); out.Err != nil {
		t.Fatal(out.Err)
	}
	if d := deadlines["inline"].Sub(start); d < 30*time.Minute {
		t.Errorf("the plugin that cannot block got a deadline %v away, want the hook's (1 h)", d)
	}
	if d := deadlines["remote"].Sub(start); d > 2*time.Second {
		t.Errorf("the plugin that can block got a deadline %v away, want its plugin_timeout (1 s)", d)
	}
}

// A plugin that cannot block has its plugin_timeout checked when it
// returns: a failure after it is a timeout (as a timer would have made
// it), a result after it is kept.
func TestNonBlockingTimeout(t *testing.T) {
	const timeout = 20 * time.Millisecond
	failAfter := func(d time.Duration) handler {
		return func(context.Context, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			time.Sleep(d)
			return &cpex.InvokeHookReply{Error: &cpex.PluginErrorModel{Message: "broken"}}, nil
		}
	}
	okAfter := func(d time.Duration) handler {
		return func(ctx context.Context, p json.RawMessage, pc *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			time.Sleep(d)
			return okH()(ctx, p, pc)
		}
	}
	for _, tc := range []struct {
		name    string
		h       handler
		outcome string
		timeout bool // Outcome.Err is a timeout; false with an outcome other than error: no Err
	}{
		{"slow failure", failAfter(2 * timeout), "inline:timeout", true},
		{"quick failure", failAfter(0), "inline:error", false},
		{"slow result", okAfter(2 * timeout), "inline:allow", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(plug("inline", config.ModeSequential, 1))
			f.set("inline", tc.h)
			obs := &recorder{}
			e := newNonBlockingExec(t, f, []string{"inline"}, Options{
				Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(timeout)}, HookTimeout: time.Minute, Observer: obs})
			out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
			if diff := cmp.Diff([]string{tc.outcome}, obs.outcomes()); diff != "" {
				t.Errorf("outcomes: %s", diff)
			}
			switch {
			case tc.timeout:
				if out.Err == nil || !out.Err.Timeout || !errors.Is(out.Err, context.DeadlineExceeded) || !errors.Is(out.Err, ErrPluginReported) {
					t.Errorf("err = %#v, want the plugin's failure as a timeout", out.Err)
				}
			case tc.outcome == "inline:error":
				if out.Err == nil || out.Err.Timeout {
					t.Errorf("err = %#v, want a failure that is not a timeout", out.Err)
				}
			case out.Err != nil:
				t.Errorf("err = %v, want the result kept", out.Err)
			}
		})
	}
}

// The hook deadline applies to a plugin that cannot block as to any: not
// called once it has passed.
func TestNonBlockingHookDeadline(t *testing.T) {
	f := newFake(onErr(plug("slow", config.ModeSequential, 1), config.OnErrorIgnore), plug("inline", config.ModeSequential, 2))
	f.set("slow", waitH())
	obs := &recorder{}
	e := newNonBlockingExec(t, f, []string{"inline"}, Options{
		Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(time.Minute)}, HookTimeout: 50 * time.Millisecond, Observer: obs})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err == nil || out.Err.Plugin != "inline" || !errors.Is(out.Err, ErrHookDeadline) {
		t.Fatalf("err = %#v, want inline failing on the hook deadline", out.Err)
	}
	if diff := cmp.Diff([]string{"slow"}, f.called()); diff != "" {
		t.Errorf("calls: %s", diff)
	}
	if diff := cmp.Diff([]string{"slow:timeout", "inline:timeout"}, obs.outcomes()); diff != "" {
		t.Errorf("outcomes: %s", diff)
	}
}

// A serial plugin that cannot block sees the same plugin context as any
// other (the request's global context, its own local context carried from
// an earlier hook), lent rather than copied.
func TestNonBlockingPluginContext(t *testing.T) {
	f := newFake(plug("inline", config.ModeSequential, 1))
	var seen []cpex.PluginContext
	f.set("inline", func(_ context.Context, _ json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		seen = append(seen, *pctx) // the context is lent: keep a copy
		c := cpex.PluginContext{State: map[string]any{"mine": "pre"}, Metadata: map[string]any{"m": 1},
			GlobalContext: cpex.GlobalContext{State: map[string]any{"from-inline": true}}}
		return &cpex.InvokeHookReply{Result: &cpex.PluginResult{}, Context: &c}, nil
	})
	e := newNonBlockingExec(t, f, []string{"inline"}, Options{})
	rc := NewRequestContext(cpex.GlobalContext{RequestID: "req-9", ServerID: "srv", State: map[string]any{"initial": 1}})
	e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), rc, Target{})
	e.Run(context.Background(), cpex.ToolPostInvoke, json.RawMessage(`{"name":"fetch","result":{"content":[]}}`), rc, Target{})
	if len(seen) != 2 {
		t.Fatalf("called %d times", len(seen))
	}
	for i, pc := range seen {
		g := pc.GlobalContext
		if g.RequestID != "req-9" || g.ServerID != "srv" || g.State["initial"] != 1 {
			t.Errorf("call %d: global context %+v", i, g)
		}
	}
	if len(seen[0].State) != 0 {
		t.Errorf("pre hook: local state %v, want none", seen[0].State)
	}
	if seen[1].State["mine"] != "pre" || seen[1].Metadata["m"] != 1 || seen[1].GlobalContext.State["from-inline"] != true {
		t.Errorf("post hook: %+v, want the state the pre hook returned", seen[1])
	}
}

// A hook whose plugins all cannot block has its deadline read from the
// clock: a plugin not yet called once it has passed fails as under a
// timer, and a plugin that does wait (declared non-blocking wrongly) is
// still cut at the deadline.
func TestNonBlockingHookClockDeadline(t *testing.T) {
	f := newFake(onErr(plug("slow", config.ModeSequential, 1), config.OnErrorIgnore), plug("next", config.ModeSequential, 2))
	f.set("slow", func(ctx context.Context, p json.RawMessage, pc *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		time.Sleep(60 * time.Millisecond) // computes past the deadline
		return okH()(ctx, p, pc)
	})
	obs := &recorder{}
	e := newNonBlockingExec(t, f, []string{"slow", "next"}, Options{
		Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(time.Minute)}, HookTimeout: 30 * time.Millisecond, Observer: obs})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err == nil || out.Err.Plugin != "next" || !out.Err.Timeout || !errors.Is(out.Err, ErrHookDeadline) {
		t.Fatalf("err = %#v, want next failing on the hook deadline", out.Err)
	}
	if diff := cmp.Diff([]string{"slow:allow", "next:timeout"}, obs.outcomes()); diff != "" {
		t.Errorf("outcomes: %s", diff)
	}

	f.set("slow", waitH())
	obs2 := &recorder{}
	e2 := newNonBlockingExec(t, f, []string{"slow", "next"}, Options{
		Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(time.Minute)}, HookTimeout: 30 * time.Millisecond, Observer: obs2})
	start := time.Now()
	out = e2.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a waiting plugin held the hook %v", d)
	}
	if out.Err == nil || out.Err.Plugin != "next" || !errors.Is(out.Err, ErrHookDeadline) {
		t.Errorf("err = %#v, want next failing on the hook deadline", out.Err)
	}
	if diff := cmp.Diff([]string{"slow:timeout", "next:timeout"}, obs2.outcomes()); diff != "" {
		t.Errorf("outcomes: %s", diff)
	}
}

// A run's state is reused from one Run to the next: nothing of a run that
// blocked or modified reaches the next one.
func TestRunStateNotCarried(t *testing.T) {
	f := newFake(plug("inline", config.ModeSequential, 1))
	e := newNonBlockingExec(t, f, []string{"inline"}, Options{})
	ctx := context.Background()
	for i, tc := range []struct {
		h                 handler
		blocked, modified bool
	}{
		{blockH("NO"), true, false},
		{okH(), false, false},
		{modifyH(toolPreA), false, true},
		{okH(), false, false},
	} {
		f.set("inline", tc.h)
		out := e.Run(ctx, cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
		if got := out.Violation != nil; got != tc.blocked {
			t.Errorf("run %d: blocked %v, want %v", i, got, tc.blocked)
		}
		if out.Modified != tc.modified {
			t.Errorf("run %d: modified %v, want %v", i, out.Modified, tc.modified)
		}
	}
}
