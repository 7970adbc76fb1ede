package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ---- a fake plugin pool ----

type handler func(ctx context.Context, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error)

type call struct {
	plugin  string
	hook    cpex.HookType
	payload string
	pctx    *cpex.PluginContext
}

type fake struct {
	mu       sync.Mutex
	gen      uint64
	plugins  []config.Plugin
	handlers map[string]handler
	calls    []call
}

func newFake(plugins ...config.Plugin) *fake {
	return &fake{gen: 1, plugins: plugins, handlers: map[string]handler{}}
}

func (f *fake) Invoke(ctx context.Context, plugin string, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	f.mu.Lock()
	f.calls = append(f.calls, call{plugin, hook, string(payload), pctx})
	h := f.handlers[plugin]
	f.mu.Unlock()
	if h == nil {
		return okH()(ctx, payload, pctx)
	}
	return h(ctx, payload, pctx)
}

func (f *fake) Effective() (uint64, []config.Plugin) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gen, f.plugins
}

func (f *fake) set(plugin string, h handler) {
	f.mu.Lock()
	f.handlers[plugin] = h
	f.mu.Unlock()
}

func (f *fake) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		out = append(out, c.plugin)
	}
	return out
}

func (f *fake) callsOf(plugin string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.plugin == plugin {
			out = append(out, c)
		}
	}
	return out
}

func (f *fake) reset() {
	f.mu.Lock()
	f.calls = nil
	f.mu.Unlock()
}

// ---- builders ----

var allMCPHooks = cpex.MCPHooks[:]

func plug(name string, mode config.Mode, priority int, hooks ...cpex.HookType) config.Plugin {
	if len(hooks) == 0 {
		hooks = allMCPHooks
	}
	return config.Plugin{Name: name, Kind: "external", Mode: mode, Priority: &priority, Hooks: hooks}
}

func onErr(p config.Plugin, o config.OnError) config.Plugin {
	p.OnError = o
	return p
}

func when(p config.Plugin, c ...config.Condition) config.Plugin {
	p.Conditions = c
	return p
}

func resultH(r cpex.PluginResult) handler {
	return func(context.Context, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		r := r
		return &cpex.InvokeHookReply{Result: &r}, nil
	}
}

func okH() handler { return resultH(cpex.PluginResult{}) }

func modifyH(payload string) handler {
	return resultH(cpex.PluginResult{ModifiedPayload: json.RawMessage(payload)})
}

var no = false

func blockH(code string) handler {
	return resultH(cpex.PluginResult{ContinueProcessing: &no, Violation: &cpex.PluginViolation{Reason: "denied", Code: code}})
}

func stopH(modified string) handler {
	r := cpex.PluginResult{ContinueProcessing: &no}
	if modified != "" {
		r.ModifiedPayload = json.RawMessage(modified)
	}
	return resultH(r)
}

func errH(err error) handler {
	return func(context.Context, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		return nil, err
	}
}

// waitH blocks until ctx is done, as a hung plugin would.
func waitH() handler {
	return func(ctx context.Context, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
}

const (
	toolPre  = `{"name":"fetch","args":{"url":"http://a"}}`
	toolPreA = `{"name":"fetch","args":{"url":"http://A"}}`
	toolPreB = `{"name":"fetch","args":{"url":"http://B"}}`
)

type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) OnInvoke(plugin string, hook cpex.HookType, v Verdict, _ time.Duration) {
	r.mu.Lock()
	r.got = append(r.got, plugin+":"+v.String())
	r.mu.Unlock()
}

func (r *recorder) outcomes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func newExec(t *testing.T, f *fake, opts Options) *Executor {
	t.Helper()
	e := New(f, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// closeNow waits for fire_and_forget work, so its calls are recorded.
func closeNow(t *testing.T, e *Executor) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func compact(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("compact %q: %v", s, err)
	}
	return b.String()
}

// ---- the chain ----

func TestChain(t *testing.T) {
	seq, tr, au, co, ff, dis := config.ModeSequential, config.ModeTransform, config.ModeAudit,
		config.ModeConcurrent, config.ModeFireAndForget, config.ModeDisabled
	tests := []struct {
		name     string
		plugins  []config.Plugin
		handlers map[string]handler
		settings config.PluginSettings
		// calls in order, fire_and_forget last (at most one per row)
		wantCalls     []string
		wantPayload   string // "" = not modified
		wantViolation string // blocking plugin
		wantErr       string // failing plugin
		wantOutcomes  []string
	}{
		{
			name:         "priority order, config order among equals, legacy modes",
			plugins:      []config.Plugin{plug("c", seq, 20), plug("a", "enforce", 10), plug("b", seq, 20), plug("d", "", 5)},
			wantCalls:    []string{"d", "a", "c", "b"},
			wantOutcomes: []string{"d:allow", "a:allow", "c:allow", "b:allow"},
		},
		{
			name: "phases in order whatever the priority",
			plugins: []config.Plugin{plug("ff", ff, 1), plug("co", co, 1), plug("au", au, 1),
				plug("tr", "permissive", 1), plug("sq", seq, 500), plug("off", dis, 0)},
			wantCalls: []string{"sq", "tr", "au", "co", "ff"},
		},
		{
			name:         "sequential chains modifications",
			plugins:      []config.Plugin{plug("a", seq, 1), plug("b", seq, 2)},
			handlers:     map[string]handler{"a": modifyH(toolPreA), "b": modifyH(toolPreB)},
			wantCalls:    []string{"a", "b"},
			wantPayload:  toolPreB,
			wantOutcomes: []string{"a:modify", "b:modify"},
		},
		{
			name:         "an unchanged modified_payload is not a modification",
			plugins:      []config.Plugin{plug("a", seq, 1)},
			handlers:     map[string]handler{"a": modifyH(`{ "args": {"url": "http://a"}, "name": "fetch" }`)},
			wantCalls:    []string{"a"},
			wantOutcomes: []string{"a:allow"},
		},
		{
			name: "sequential block stops everything but fire_and_forget",
			plugins: []config.Plugin{plug("a", seq, 1), plug("b", seq, 2), plug("c", seq, 3),
				plug("t", tr, 1), plug("au", au, 1), plug("co", co, 1), plug("ff", ff, 1)},
			handlers:      map[string]handler{"a": modifyH(toolPreA), "b": blockH("DENY")},
			wantCalls:     []string{"a", "b", "ff"},
			wantPayload:   toolPreA,
			wantViolation: "b",
			wantOutcomes:  []string{"a:modify", "b:block", "ff:allow"},
		},
		{
			name: "stop without violation: chain ends, message goes on, stopper's change dropped",
			plugins: []config.Plugin{plug("a", seq, 1), plug("b", seq, 2), plug("c", seq, 3),
				plug("au", au, 1), plug("ff", ff, 1)},
			handlers:     map[string]handler{"a": modifyH(toolPreA), "b": stopH(toolPreB)},
			wantCalls:    []string{"a", "b", "ff"},
			wantPayload:  toolPreA,
			wantOutcomes: []string{"a:modify", "b:stop", "ff:allow"},
		},
		{
			name:         "violation with continue_processing true is not a block",
			plugins:      []config.Plugin{plug("a", seq, 1), plug("b", seq, 2)},
			handlers:     map[string]handler{"a": resultH(cpex.PluginResult{Violation: &cpex.PluginViolation{Code: "X"}})},
			wantCalls:    []string{"a", "b"},
			wantOutcomes: []string{"a:violation_not_enforced", "b:allow"},
		},
		{
			name:         "transform: violation suppressed, modification kept",
			plugins:      []config.Plugin{plug("t", tr, 1), plug("u", tr, 2)},
			handlers:     map[string]handler{"t": resultH(cpex.PluginResult{ContinueProcessing: &no, ModifiedPayload: json.RawMessage(toolPreA), Violation: &cpex.PluginViolation{Code: "PII"}})},
			wantCalls:    []string{"t", "u"},
			wantPayload:  toolPreA,
			wantOutcomes: []string{"t:violation_not_enforced", "u:allow"},
		},
		{
			name:         "audit: violation logged, modification discarded, stop ignored",
			plugins:      []config.Plugin{plug("au", au, 1), plug("av", au, 2), plug("s", seq, 1)},
			handlers:     map[string]handler{"au": blockH("AUDIT"), "av": stopH(toolPreB)},
			wantCalls:    []string{"s", "au", "av"},
			wantOutcomes: []string{"s:allow", "au:violation_not_enforced", "av:stop"},
		},
		{
			name:          "concurrent alone: block",
			plugins:       []config.Plugin{plug("co", co, 1)},
			handlers:      map[string]handler{"co": blockH("DENY")},
			wantCalls:     []string{"co"},
			wantViolation: "co",
		},
		{
			name:      "concurrent: modification discarded",
			plugins:   []config.Plugin{plug("co", co, 1)},
			handlers:  map[string]handler{"co": modifyH(toolPreA)},
			wantCalls: []string{"co"},
		},
		{
			name:      "disabled mode never runs",
			plugins:   []config.Plugin{plug("off", dis, 1), plug("a", seq, 2)},
			wantCalls: []string{"a"},
		},
		{
			name:         "on_error fail refuses and skips the rest, fire_and_forget included",
			plugins:      []config.Plugin{plug("a", seq, 1), plug("b", seq, 2), plug("ff", ff, 1)},
			handlers:     map[string]handler{"a": errH(errors.New("connection refused"))},
			wantCalls:    []string{"a"},
			wantErr:      "a",
			wantOutcomes: []string{"a:error"},
		},
		{
			name:         "on_error ignore goes on",
			plugins:      []config.Plugin{onErr(plug("a", seq, 1), config.OnErrorIgnore), plug("b", seq, 2)},
			handlers:     map[string]handler{"a": errH(errors.New("boom")), "b": modifyH(toolPreB)},
			wantCalls:    []string{"a", "b"},
			wantPayload:  toolPreB,
			wantOutcomes: []string{"a:error", "b:modify"},
		},
		{
			name:         "legacy enforce_ignore_error ignores errors",
			plugins:      []config.Plugin{plug("a", "enforce_ignore_error", 1), plug("b", seq, 2)},
			handlers:     map[string]handler{"a": errH(errors.New("boom"))},
			wantCalls:    []string{"a", "b"},
			wantOutcomes: []string{"a:error", "b:allow"},
		},
		{
			name:      "fail_on_plugin_error forces fail",
			plugins:   []config.Plugin{onErr(plug("a", seq, 1), config.OnErrorIgnore), plug("b", seq, 2)},
			handlers:  map[string]handler{"a": errH(errors.New("boom"))},
			settings:  config.PluginSettings{FailOnPluginError: true},
			wantCalls: []string{"a"},
			wantErr:   "a",
		},
		{
			name:      "on_error fail applies to audit plugins too",
			plugins:   []config.Plugin{plug("au", au, 1)},
			handlers:  map[string]handler{"au": errH(errors.New("boom"))},
			wantCalls: []string{"au"},
			wantErr:   "au",
		},
		{
			name:         "fire_and_forget errors are only logged",
			plugins:      []config.Plugin{plug("ff", ff, 1), plug("a", seq, 1)},
			handlers:     map[string]handler{"ff": errH(errors.New("boom")), "a": modifyH(toolPreA)},
			wantCalls:    []string{"a", "ff"},
			wantPayload:  toolPreA,
			wantOutcomes: []string{"a:modify", "ff:error"},
		},
		{
			name:    "plugin-reported error",
			plugins: []config.Plugin{plug("a", seq, 1)},
			handlers: map[string]handler{"a": func(context.Context, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				return &cpex.InvokeHookReply{Error: &cpex.PluginErrorModel{Message: "model unavailable", Code: "E1"}}, nil
			}},
			wantCalls:    []string{"a"},
			wantErr:      "a",
			wantOutcomes: []string{"a:error"},
		},
		{
			name:    "reply with neither result nor error",
			plugins: []config.Plugin{plug("a", seq, 1)},
			handlers: map[string]handler{"a": func(context.Context, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
				return &cpex.InvokeHookReply{PluginName: "a"}, nil
			}},
			wantCalls:    []string{"a"},
			wantErr:      "a",
			wantOutcomes: []string{"a:invalid"},
		},
		{
			name:         "invalid modified payload is a plugin error",
			plugins:      []config.Plugin{plug("a", seq, 1)},
			handlers:     map[string]handler{"a": modifyH(`{"name":"fetch","args":"not an object"}`)},
			wantCalls:    []string{"a"},
			wantErr:      "a",
			wantOutcomes: []string{"a:invalid"},
		},
		{
			name:         "invalid modified payload under ignore: payload unchanged",
			plugins:      []config.Plugin{onErr(plug("a", tr, 1), config.OnErrorIgnore)},
			handlers:     map[string]handler{"a": modifyH(`{"args":{}}`)},
			wantCalls:    []string{"a"},
			wantOutcomes: []string{"a:invalid"},
		},
		{
			name:         "invalid payload from an audit plugin does not matter: discarded",
			plugins:      []config.Plugin{plug("a", au, 1)},
			handlers:     map[string]handler{"a": modifyH(`[1]`)},
			wantCalls:    []string{"a"},
			wantOutcomes: []string{"a:allow"},
		},
		{
			name:      "a hook listed twice runs once",
			plugins:   []config.Plugin{plug("a", seq, 1, cpex.ToolPreInvoke, cpex.ToolPreInvoke)},
			wantCalls: []string{"a"},
		},
		{
			name:      "plugins without the hook do not run",
			plugins:   []config.Plugin{plug("a", seq, 1, cpex.ToolPostInvoke), plug("b", seq, 1, cpex.ToolPreInvoke)},
			wantCalls: []string{"b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(tt.plugins...)
			for k, h := range tt.handlers {
				f.set(k, h)
			}
			obs := &recorder{}
			e := newExec(t, f, Options{Settings: tt.settings, Observer: obs})
			if !e.Applies(cpex.ToolPreInvoke) {
				t.Fatal("Applies(tool_pre_invoke) = false")
			}
			rc := NewRequestContext(cpex.GlobalContext{RequestID: "req-1"})
			out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), rc, hookfamily.TargetOf(cpex.ToolPreInvoke, "fetch"))
			closeNow(t, e)

			if diff := cmp.Diff(tt.wantCalls, f.called()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			if tt.wantPayload == "" {
				if out.Modified || out.Payload != nil {
					t.Errorf("modified: %v %s", out.Modified, out.Payload)
				}
			} else if !out.Modified || compact(t, string(out.Payload)) != compact(t, tt.wantPayload) {
				t.Errorf("payload = %v %s, want %s", out.Modified, out.Payload, tt.wantPayload)
			}
			switch {
			case tt.wantViolation == "" && out.Violation != nil:
				t.Errorf("unexpected violation %+v", out.Violation)
			case tt.wantViolation != "" && (out.Violation == nil || out.Violation.PluginName != tt.wantViolation):
				t.Errorf("violation = %+v, want one from %s", out.Violation, tt.wantViolation)
			}
			switch {
			case tt.wantErr == "" && out.Err != nil:
				t.Errorf("unexpected error %v", out.Err)
			case tt.wantErr != "" && (out.Err == nil || out.Err.Plugin != tt.wantErr || out.Err.Hook != cpex.ToolPreInvoke):
				t.Errorf("err = %v, want one from %s", out.Err, tt.wantErr)
			}
			if tt.wantOutcomes != nil {
				if diff := cmp.Diff(tt.wantOutcomes, obs.outcomes()); diff != "" {
					t.Errorf("observed outcomes (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestPluginErrorDetails(t *testing.T) {
	f := newFake(plug("pii", config.ModeSequential, 1))
	f.set("pii", func(context.Context, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		return &cpex.InvokeHookReply{Error: &cpex.PluginErrorModel{Message: "model unavailable", Code: "E1"}}, nil
	})
	e := newExec(t, f, Options{})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err == nil {
		t.Fatal("no error")
	}
	if want := "plugin pii: tool_pre_invoke: plugin reported an error: model unavailable (code E1)"; out.Err.Error() != want {
		t.Errorf("Error() = %q, want %q", out.Err.Error(), want)
	}
	if !errors.Is(out.Err, ErrPluginReported) || out.Err.Model == nil || out.Err.Model.Code != "E1" {
		t.Errorf("err = %#v", out.Err)
	}

	f.set("pii", modifyH(`{"name":""}`))
	out = e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if !errors.Is(out.Err, ErrInvalidPayload) {
		t.Errorf("err = %v, want ErrInvalidPayload", out.Err)
	}
	f.set("pii", func(context.Context, json.RawMessage, *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		return nil, nil
	})
	out = e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if !errors.Is(out.Err, ErrInvalidReply) {
		t.Errorf("err = %v, want ErrInvalidReply", out.Err)
	}
}

func TestOnErrorDisable(t *testing.T) {
	f := newFake(onErr(plug("flaky", config.ModeSequential, 1, cpex.ToolPreInvoke), config.OnErrorDisable),
		plug("other", config.ModeSequential, 2, cpex.ToolPostInvoke))
	f.set("flaky", errH(errors.New("boom")))
	e := newExec(t, f, Options{})
	before := e.Version()

	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err != nil || out.Violation != nil {
		t.Fatalf("outcome %+v", out)
	}
	if e.Applies(cpex.ToolPreInvoke) {
		t.Error("Applies after disable: only the disabled plugin has the hook")
	}
	disabled := e.Version()
	if disabled == before {
		t.Error("Version unchanged by a plugin disabled at run time: what callers derived from Applies goes stale")
	}
	f.set("flaky", okH())
	e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if n := len(f.callsOf("flaky")); n != 1 {
		t.Errorf("disabled plugin called %d times, want 1", n)
	}
	// A new generation of configs does not re-enable it: disable is for the
	// life of the Executor.
	f.mu.Lock()
	f.gen++
	f.mu.Unlock()
	e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if n := len(f.callsOf("flaky")); n != 1 {
		t.Errorf("disabled plugin called %d times after a new generation, want 1", n)
	}
	if v := e.Version(); v == disabled || v == before {
		t.Errorf("Version %d after a new generation, as before it (%d, %d)", v, before, disabled)
	}
	if !e.Applies(cpex.ToolPostInvoke) {
		t.Error("other plugin lost")
	}
}

func TestPluginTimeout(t *testing.T) {
	for _, policy := range []config.OnError{config.OnErrorFail, config.OnErrorIgnore, config.OnErrorDisable} {
		t.Run(string(policy), func(t *testing.T) {
			f := newFake(onErr(plug("slow", config.ModeSequential, 1), policy), plug("next", config.ModeSequential, 2))
			f.set("slow", waitH())
			obs := &recorder{}
			// The hook deadline is far away: the plugin's own timeout fires.
			e := newExec(t, f, Options{Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(50 * time.Millisecond)},
				HookTimeout: time.Minute, Observer: obs})
			out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
			switch policy {
			case config.OnErrorFail:
				if out.Err == nil || !out.Err.Timeout || !errors.Is(out.Err, context.DeadlineExceeded) {
					t.Fatalf("err = %#v, want a timeout", out.Err)
				}
				if slices.Contains(f.called(), "next") {
					t.Error("next ran after a failing timeout")
				}
			default:
				if out.Err != nil || !slices.Contains(f.called(), "next") {
					t.Errorf("err %v, calls %v", out.Err, f.called())
				}
			}
			if got := obs.outcomes()[0]; got != "slow:timeout" {
				t.Errorf("observed %q", got)
			}
			// A plugin timeout is the plugin's own failure: disable applies.
			disabled := e.isDisabled("slow")
			if disabled != (policy == config.OnErrorDisable) {
				t.Errorf("disabled = %v under %s", disabled, policy)
			}
		})
	}
}

func TestHookDeadline(t *testing.T) {
	f := newFake(
		onErr(plug("slow", config.ModeSequential, 1), config.OnErrorDisable),
		plug("strict", config.ModeSequential, 2),
		onErr(plug("lenient", config.ModeSequential, 3), config.OnErrorIgnore),
	)
	f.set("slow", waitH())
	obs := &recorder{}
	e := newExec(t, f, Options{Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(time.Minute)},
		HookTimeout: 100 * time.Millisecond, Observer: obs})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})

	// slow is cut by the hook deadline (not its own timeout): it is not
	// disabled; strict never gets called and fails closed.
	if out.Err == nil || out.Err.Plugin != "strict" || !out.Err.Timeout || !errors.Is(out.Err, ErrHookDeadline) {
		t.Fatalf("err = %#v, want strict failing on the hook deadline", out.Err)
	}
	if diff := cmp.Diff([]string{"slow"}, f.called()); diff != "" {
		t.Errorf("calls: %s", diff)
	}
	if e.isDisabled("slow") {
		t.Error("slow was disabled for the hook's deadline")
	}
	if diff := cmp.Diff([]string{"slow:timeout", "strict:timeout"}, obs.outcomes()); diff != "" {
		t.Errorf("outcomes: %s", diff)
	}
}

func TestCancelledRequest(t *testing.T) {
	f := newFake(onErr(plug("a", config.ModeSequential, 1), config.OnErrorDisable))
	f.set("a", waitH())
	e := newExec(t, f, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	f.set("a", func(ctx context.Context, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		cancel() // the client went away mid-call
		<-ctx.Done()
		return nil, ctx.Err()
	})
	out := e.Run(ctx, cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err != nil || e.isDisabled("a") {
		t.Errorf("err %v, disabled %v: a cancelled request must not disable a plugin", out.Err, e.isDisabled("a"))
	}
}

func TestDown(t *testing.T) {
	errDown := errors.New("circuit open")
	f := newFake(onErr(plug("a", config.ModeSequential, 1), config.OnErrorIgnore), plug("b", config.ModeSequential, 2))
	f.set("a", errH(errDown))
	f.set("b", errH(errDown))
	obs := &recorder{}
	e := newExec(t, f, Options{Observer: obs, IsDown: func(err error) bool { return errors.Is(err, errDown) }})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err == nil || out.Err.Plugin != "b" || !out.Err.Down || out.Err.Timeout {
		t.Fatalf("err = %#v, want b down", out.Err)
	}
	if diff := cmp.Diff([]string{"a:down", "b:down"}, obs.outcomes()); diff != "" {
		t.Errorf("outcomes: %s", diff)
	}
}

// ---- concurrent ----

// TestConcurrentRunsInParallel: each plugin waits until all have started;
// run one after the other they would time out and fail closed.
func TestConcurrentRunsInParallel(t *testing.T) {
	const n = 3
	var (
		mu      sync.Mutex
		started int
		all     = make(chan struct{})
	)
	f := newFake()
	for _, name := range []string{"c1", "c2", "c3"} {
		f.plugins = append(f.plugins, plug(name, config.ModeConcurrent, 1))
		f.set(name, func(ctx context.Context, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			mu.Lock()
			started++
			if started == n {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
				return &cpex.InvokeHookReply{Result: &cpex.PluginResult{ModifiedPayload: json.RawMessage(toolPreA)}}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	}
	e := newExec(t, f, Options{Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(5 * time.Second)}})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err != nil || out.Violation != nil {
		t.Fatalf("outcome %+v", out)
	}
	if out.Modified {
		t.Error("concurrent modifications must be discarded")
	}
}

func TestConcurrentFirstBlockWins(t *testing.T) {
	f := newFake(plug("blocker", config.ModeConcurrent, 1), plug("hang", config.ModeConcurrent, 2),
		plug("later", config.ModeFireAndForget, 1))
	hangStarted := make(chan struct{})
	f.set("blocker", func(ctx context.Context, p json.RawMessage, pc *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		<-hangStarted // block while the other plugin is in flight
		return blockH("DENY")(ctx, p, pc)
	})
	cancelled := make(chan error, 1)
	f.set("hang", func(ctx context.Context, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		close(hangStarted)
		<-ctx.Done()
		cancelled <- ctx.Err()
		return nil, ctx.Err()
	})
	// hang fails closed (on_error fail by default): its cancellation must
	// not count once the block decided.
	e := newExec(t, f, Options{Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(time.Minute)}})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Violation == nil || out.Violation.PluginName != "blocker" || out.Violation.Code != "DENY" || out.Err != nil {
		t.Fatalf("outcome %+v", out)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("hang ended with %v, want context.Canceled", err)
		}
	default:
		t.Error("Run returned before the cancelled plugin ended")
	}
	closeNow(t, e)
	if !slices.Contains(f.called(), "later") {
		t.Error("fire_and_forget did not run after a block")
	}
}

func TestConcurrentFailure(t *testing.T) {
	f := newFake(plug("bad", config.ModeConcurrent, 1), plug("hang", config.ModeConcurrent, 2))
	f.set("bad", errH(errors.New("boom")))
	f.set("hang", waitH())
	e := newExec(t, f, Options{Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(time.Minute)}})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err == nil || out.Err.Plugin != "bad" {
		t.Fatalf("err = %v, want bad", out.Err)
	}
}

func TestConcurrentIgnoredFailureAndStop(t *testing.T) {
	f := newFake(onErr(plug("bad", config.ModeConcurrent, 1), config.OnErrorIgnore), plug("ok", config.ModeConcurrent, 2),
		plug("stopper", config.ModeConcurrent, 3))
	f.set("bad", errH(errors.New("boom")))
	e := newExec(t, f, Options{})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err != nil || out.Violation != nil {
		t.Fatalf("outcome %+v", out)
	}
	got := f.called()
	sort.Strings(got)
	if diff := cmp.Diff([]string{"bad", "ok", "stopper"}, got); diff != "" {
		t.Errorf("calls: %s", diff)
	}

	f.set("stopper", stopH(""))
	f.set("bad", waitH())
	out = e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err != nil || out.Violation != nil || out.Modified {
		t.Fatalf("stop: outcome %+v", out)
	}
}

// ---- conditions ----

func TestConditions(t *testing.T) {
	g := cpex.GlobalContext{RequestID: "r", ServerID: "srv1", TenantID: "acme", User: json.RawMessage(`"alice@example.com"`)}
	tests := []struct {
		name   string
		conds  []config.Condition
		hook   cpex.HookType
		g      *cpex.GlobalContext
		target string
		want   bool
	}{
		{"none", nil, cpex.ToolPreInvoke, &g, "x", true},
		{"empty lists are unset", []config.Condition{{ServerIDs: []string{}, TenantIDs: []string{}}}, cpex.ToolPreInvoke, &g, "", true},
		{"server listed", []config.Condition{{ServerIDs: []string{"srv0", "srv1"}}}, cpex.ToolPreInvoke, &g, "", true},
		{"server not listed", []config.Condition{{ServerIDs: []string{"srv0"}}}, cpex.ToolPreInvoke, &g, "", false},
		{"server unknown", []config.Condition{{ServerIDs: []string{"srv1"}}}, cpex.ToolPreInvoke, &cpex.GlobalContext{}, "", false},
		{"tenant", []config.Condition{{TenantIDs: []string{"acme"}}}, cpex.ToolPreInvoke, &g, "", true},
		{"tenant mismatch", []config.Condition{{TenantIDs: []string{"other"}}}, cpex.ToolPreInvoke, &g, "", false},
		{"tool listed", []config.Condition{{Tools: []string{"fetch"}}}, cpex.ToolPostInvoke, &g, "fetch", true},
		{"tool not listed", []config.Condition{{Tools: []string{"fetch"}}}, cpex.ToolPreInvoke, &g, "shell", false},
		{"tools ignored for prompt hooks (cpex)", []config.Condition{{Tools: []string{"fetch"}}}, cpex.PromptPreFetch, &g, "p", true},
		{"prompt", []config.Condition{{Prompts: []string{"greet"}}}, cpex.PromptPostFetch, &g, "greet", true},
		{"prompt mismatch", []config.Condition{{Prompts: []string{"greet"}}}, cpex.PromptPreFetch, &g, "other", false},
		{"resource", []config.Condition{{Resources: []string{"file:///a"}}}, cpex.ResourcePreFetch, &g, "file:///a", true},
		{"resource mismatch", []config.Condition{{Resources: []string{"file:///a"}}}, cpex.ResourcePostFetch, &g, "file:///b", false},
		{"empty target value matches (cpex)", []config.Condition{{Tools: []string{"fetch"}}}, cpex.ToolPreInvoke, &g, "", true},
		{"user substring", []config.Condition{{UserPatterns: []string{"@example.com"}}}, cpex.ToolPreInvoke, &g, "", true},
		{"user mismatch", []config.Condition{{UserPatterns: []string{"admin"}}}, cpex.ToolPreInvoke, &g, "", false},
		{"no user matches (cpex)", []config.Condition{{UserPatterns: []string{"admin"}}}, cpex.ToolPreInvoke, &cpex.GlobalContext{}, "", true},
		{"user object email", []config.Condition{{UserPatterns: []string{"bob@"}}}, cpex.ToolPreInvoke,
			&cpex.GlobalContext{User: json.RawMessage(`{"email":"bob@corp","id":"u1","is_admin":true}`)}, "", true},
		{"user object id", []config.Condition{{UserPatterns: []string{"u1"}}}, cpex.ToolPreInvoke,
			&cpex.GlobalContext{User: json.RawMessage(`{"email":"bob@corp","id":"u1"}`)}, "", true},
		{"user object keys do not match", []config.Condition{{UserPatterns: []string{"is_admin"}}}, cpex.ToolPreInvoke,
			&cpex.GlobalContext{User: json.RawMessage(`{"email":"bob@corp","is_admin":true}`)}, "", false},
		{"numeric id", []config.Condition{{UserPatterns: []string{"42"}}}, cpex.ToolPreInvoke,
			&cpex.GlobalContext{User: json.RawMessage(`{"id":42}`)}, "", true},
		{"AND inside an entry", []config.Condition{{ServerIDs: []string{"srv1"}, Tools: []string{"shell"}}}, cpex.ToolPreInvoke, &g, "fetch", false},
		{"OR across entries", []config.Condition{{ServerIDs: []string{"srv9"}}, {Tools: []string{"fetch"}}}, cpex.ToolPreInvoke, &g, "fetch", true},
		{"agents and content types ignored", []config.Condition{{Agents: []string{"a"}, ContentTypes: []string{"text/plain"}}}, cpex.ToolPreInvoke, &g, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			users := func() []string { return userStrings(tt.g.User) }
			if got := matches(tt.conds, tt.g, hookfamily.TargetOf(tt.hook, tt.target), users); got != tt.want {
				t.Errorf("matches = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestConditionsSkipPlugins(t *testing.T) {
	f := newFake(
		when(plug("fetch-only", config.ModeSequential, 1), config.Condition{Tools: []string{"fetch"}}),
		when(plug("srv2-only", config.ModeSequential, 2), config.Condition{ServerIDs: []string{"srv2"}}),
		plug("all", config.ModeSequential, 3),
	)
	e := newExec(t, f, Options{})
	rc := NewRequestContext(cpex.GlobalContext{RequestID: "r", ServerID: "srv1"})
	e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), rc, hookfamily.TargetOf(cpex.ToolPreInvoke, "shell"))
	if diff := cmp.Diff([]string{"all"}, f.called()); diff != "" {
		t.Errorf("calls: %s", diff)
	}
	// Applies ignores conditions: they need the message.
	if !e.Applies(cpex.ToolPreInvoke) {
		t.Error("Applies = false")
	}
}

// ---- context ----

func TestContextCarry(t *testing.T) {
	f := newFake(
		plug("seq", config.ModeSequential, 1),
		plug("aud", config.ModeAudit, 1),
		plug("ff", config.ModeFireAndForget, 1),
	)
	withCtx := func(local, global string) handler {
		return func(_ context.Context, _ json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
			c := *pctx
			c.State = map[string]any{"mine": local}
			c.Metadata = map[string]any{"m": local}
			c.GlobalContext.State = map[string]any{global: true}
			return &cpex.InvokeHookReply{Result: &cpex.PluginResult{}, Context: &c}, nil
		}
	}
	f.set("seq", withCtx("seq-state", "from-seq"))
	f.set("aud", withCtx("aud-state", "from-audit"))
	f.set("ff", withCtx("ff-state", "from-ff"))
	e := newExec(t, f, Options{})
	rc := NewRequestContext(cpex.GlobalContext{RequestID: "req-7", State: map[string]any{"initial": 1}})

	e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), rc, Target{})
	// Fire-and-forget replies are not carried; wait for them first.
	closeNowKeep(t, e)

	if _, ok := rc.Global.State["from-seq"]; !ok {
		t.Errorf("sequential global state not merged: %v", rc.Global.State)
	}
	for _, k := range []string{"from-audit", "from-ff"} {
		if _, ok := rc.Global.State[k]; ok {
			t.Errorf("%s merged into the global state: %v", k, rc.Global.State)
		}
	}

	// The post hook: each plugin sees its own local state and the global.
	f.reset()
	e2 := newExec(t, f, Options{})
	e2.Run(context.Background(), cpex.ToolPostInvoke, json.RawMessage(`{"name":"fetch","result":{"content":[]}}`), rc, Target{})
	closeNowKeep(t, e2)
	for _, tc := range []struct {
		plugin, state string
	}{{"seq", "seq-state"}, {"aud", "aud-state"}, {"ff", ""}} {
		calls := f.callsOf(tc.plugin)
		if len(calls) != 1 {
			t.Fatalf("%s called %d times", tc.plugin, len(calls))
		}
		pc := calls[0].pctx
		if got, _ := pc.State["mine"].(string); got != tc.state {
			t.Errorf("%s local state = %v, want %q", tc.plugin, pc.State, tc.state)
		}
		if pc.GlobalContext.RequestID != "req-7" || pc.GlobalContext.State["initial"] != 1 || pc.GlobalContext.State["from-seq"] != true {
			t.Errorf("%s global = %+v", tc.plugin, pc.GlobalContext)
		}
	}
	// What was sent is a copy: changing it does not change rc.
	f.callsOf("seq")[0].pctx.GlobalContext.State["tamper"] = true
	if _, ok := rc.Global.State["tamper"]; ok {
		t.Error("a plugin context shares its map with the request context")
	}
}

// closeNowKeep waits for background work of e (Close is idempotent, so the
// cleanup's Close is fine afterwards).
func closeNowKeep(t *testing.T, e *Executor) { closeNow(t, e) }

// ---- fire and forget ----

func TestFireAndForgetSeesFinalPayload(t *testing.T) {
	f := newFake(plug("t", config.ModeTransform, 1), plug("ff", config.ModeFireAndForget, 1))
	f.set("t", modifyH(toolPreA))
	e := newExec(t, f, Options{})
	e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	closeNow(t, e)
	calls := f.callsOf("ff")
	if len(calls) != 1 || compact(t, calls[0].payload) != compact(t, toolPreA) {
		t.Errorf("fire_and_forget saw %v", calls)
	}
}

func TestFireAndForgetBounded(t *testing.T) {
	f := newFake(plug("ff", config.ModeFireAndForget, 1))
	release := make(chan struct{})
	f.set("ff", func(ctx context.Context, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		select {
		case <-release:
			return &cpex.InvokeHookReply{Result: &cpex.PluginResult{}}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	obs := &recorder{}
	e := newExec(t, f, Options{MaxBackground: 1, Observer: obs})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Err != nil || out.Modified || out.Violation != nil {
		t.Fatalf("outcome %+v", out)
	}
	e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{}) // over the bound
	if got := obs.outcomes(); !slices.Contains(got, "ff:dropped") {
		t.Errorf("outcomes %v, want a drop", got)
	}
	close(release)
	closeNow(t, e)
	e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{}) // after Close
	if n := strings.Count(strings.Join(obs.outcomes(), ","), "ff:dropped"); n != 2 {
		t.Errorf("outcomes %v, want two drops", obs.outcomes())
	}
	if n := len(f.callsOf("ff")); n != 1 {
		t.Errorf("ff called %d times, want 1", n)
	}
}

func TestCloseCancelsHungWork(t *testing.T) {
	f := newFake(plug("ff", config.ModeFireAndForget, 1))
	started, ended := make(chan struct{}), make(chan struct{})
	f.set("ff", func(ctx context.Context, _ json.RawMessage, _ *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		defer close(ended)
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	})
	e := New(f, Options{Settings: config.PluginSettings{PluginTimeout: config.NewSeconds(time.Hour)}})
	e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want context.Canceled", err)
	}
	<-ended // the hung invocation was cancelled
}

// ---- generations, Applies, logging ----

func TestGenerations(t *testing.T) {
	f := newFake(plug("a", config.ModeSequential, 1, cpex.ToolPreInvoke))
	e := newExec(t, f, Options{})
	if !e.Applies(cpex.ToolPreInvoke) || e.Applies(cpex.ResourcePreFetch) {
		t.Fatal("Applies wrong for generation 1")
	}
	f.mu.Lock()
	f.plugins = []config.Plugin{plug("b", config.ModeSequential, 1, cpex.ResourcePreFetch), plug("c", config.ModeDisabled, 1, cpex.ToolPreInvoke)}
	f.gen++
	f.mu.Unlock()
	if e.Applies(cpex.ToolPreInvoke) || !e.Applies(cpex.ResourcePreFetch) {
		t.Fatal("Applies did not follow generation 2")
	}
	e.Run(context.Background(), cpex.ResourcePreFetch, json.RawMessage(`{"uri":"file:///a"}`), nil, hookfamily.TargetOf(cpex.ResourcePreFetch, "file:///a"))
	if diff := cmp.Diff([]string{"b"}, f.called()); diff != "" {
		t.Errorf("calls: %s", diff)
	}
}

func TestLogsNeverCarryPayloads(t *testing.T) {
	const secret = "SECRET-4711"
	f := newFake(plug("a", config.ModeSequential, 1), plug("b", config.ModeTransform, 1),
		onErr(plug("c", config.ModeAudit, 1), config.OnErrorIgnore), plug("d", config.ModeConcurrent, 2))
	f.set("a", modifyH(`{"name":"fetch","args":{"token":"`+secret+`-2"}}`))
	f.set("b", resultH(cpex.PluginResult{ContinueProcessing: &no, Violation: &cpex.PluginViolation{Code: "C", Reason: "r"}}))
	f.set("c", errH(errors.New("boom")))
	f.set("d", blockH("DENY")) // concurrent: after the others
	var buf bytes.Buffer
	var mu sync.Mutex
	w := zerolog.SyncWriter(&lockedWriter{mu: &mu, w: &buf})
	e := newExec(t, f, Options{Logger: zerolog.New(w).Level(zerolog.DebugLevel)})
	rc := NewRequestContext(cpex.GlobalContext{RequestID: "req-log"})
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(`{"name":"fetch","args":{"token":"`+secret+`"}}`), rc, Target{})
	if out.Violation == nil {
		t.Fatal("no block")
	}
	closeNow(t, e)
	mu.Lock()
	logs := buf.String()
	mu.Unlock()
	if strings.Contains(logs, secret) {
		t.Errorf("payload in logs:\n%s", logs)
	}
	// A block is logged at info by the processor (with the MCP session id);
	// the executor's own line for it is debug, so a block is logged once.
	for _, want := range []string{`"request_id":"req-log"`, `"plugin":"d"`, `"message":"plugin blocked the message"`, `"level":"warn"`, `"outcome":"modify"`, `"duration"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestNilRequestContextAndNoPlugins(t *testing.T) {
	f := newFake()
	e := newExec(t, f, Options{})
	if e.Applies(cpex.ToolPreInvoke) {
		t.Error("Applies with no plugins")
	}
	out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
	if out.Modified || out.Violation != nil || out.Err != nil {
		t.Errorf("outcome %+v", out)
	}
}

func TestFailClosed(t *testing.T) {
	tests := []struct {
		name    string
		plugins []config.Plugin
		want    bool
	}{
		{"no plugins", nil, false},
		{"sequential fail", []config.Plugin{plug("a", config.ModeSequential, 1)}, true},
		{"sequential ignore", []config.Plugin{onErr(plug("a", config.ModeSequential, 1), config.OnErrorIgnore)}, false},
		{"transform fail", []config.Plugin{plug("a", config.ModeTransform, 1)}, true},
		{"concurrent fail", []config.Plugin{plug("a", config.ModeConcurrent, 1)}, true},
		{"audit and fire_and_forget never", []config.Plugin{plug("a", config.ModeAudit, 1), plug("b", config.ModeFireAndForget, 1)}, false},
		{"disabled mode", []config.Plugin{plug("a", config.ModeDisabled, 1)}, false},
		{"one enforcing among lenient", []config.Plugin{onErr(plug("a", config.ModeSequential, 1), config.OnErrorDisable), plug("b", config.ModeSequential, 2)}, true},
		{"other hook only", []config.Plugin{plug("a", config.ModeSequential, 1, cpex.ToolPostInvoke)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newExec(t, newFake(tt.plugins...), Options{})
			if got := e.FailClosed(cpex.ToolPreInvoke); got != tt.want {
				t.Errorf("FailClosed = %v, want %v", got, tt.want)
			}
		})
	}
}
