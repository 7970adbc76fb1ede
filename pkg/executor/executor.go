// Package executor runs one hook through the chain of external plugins with
// the semantics of the cpex plugin manager (docs/plugin-protocol.md §4.1–4.3):
// phases by mode, priority order, conditions, on_error policies, timeouts,
// and the per-request plugin context. It knows nothing of HTTP, gRPC or MCP
// transport: plugins are reached through the small [Plugins] interface that
// pluginclient.Pool satisfies.
//
// # Phases
//
// The plugins of a hook run in phases, in this order; inside a phase by
// ascending priority (lower first; config order among equals). Plugins with
// mode disabled, plugins disabled at run time (on_error: disable) and
// plugins whose conditions do not match are skipped.
//
//	sequential       serial, chained (each sees the previous one's payload); may block and modify
//	transform        serial, chained; may modify; violations are logged and suppressed
//	audit            serial, sees the current payload; violations logged, modifications discarded
//	concurrent       in parallel on the current payload; the first block wins (the others are
//	                 cancelled); modifications discarded
//	fire_and_forget  in the background after the rest, on a snapshot of the final payload and
//	                 context; errors and violations are only logged
//
// A plugin blocks by returning continue_processing: false with a violation;
// the chain stops and [Outcome.Violation] is set. continue_processing: false
// without a violation (in a mode that may block) stops the chain without
// blocking: the remaining sequential, transform, audit and concurrent
// plugins are skipped, the message goes on with the modifications made so
// far (not the stopping plugin's own, as in cpex), and fire_and_forget
// plugins still run. A violation with continue_processing left true is not a
// block (cpex decides on continue_processing alone); it is logged. Fire-and-
// forget plugins are also started after a block or a stop, not after a
// failure, as in cpex.
//
// # Failures
//
// A failed invocation (transport error, per-plugin timeout, hook deadline,
// plugin known to be down, an "error" reply, a reply with neither result
// nor error, a modified_payload that does not fit the hook) is handled by
// the plugin's on_error, whatever its mode: fail refuses the message
// ([Outcome.Err]); ignore logs and goes on; disable logs, goes on and stops
// calling the plugin for the life of the Executor. A plugin is disabled only
// for its own failures, never because the request was cancelled or the hook
// deadline passed. plugin_settings.fail_on_plugin_error makes every policy
// fail. Fire-and-forget failures are only logged (and disable).
//
// # Timeouts
//
// Each invocation is bounded by plugin_settings.plugin_timeout, and the
// whole hook by Options.HookTimeout (default plugin_timeout + 1 s), which
// must stay under Envoy's ext_proc message_timeout so the verdict reaches
// Envoy before Envoy gives up on the message. Plugins not yet called when
// the hook deadline passes fail with [ErrHookDeadline] under their on_error.
//
// A plugin that cannot block ([NonBlocking]: one running in this process
// whose invocation only computes, as pkg/builtin's do) is not given a timer
// of its own, since a timer cannot stop it: it returns when its work is
// done, whatever its context says, and arming and stopping a timer was most
// of what calling it cost. It is called directly (its [LocalPlugin], not
// through Plugins.Invoke, whose lookup by name and choice of a connection
// an in-process plugin has no use for), with the hook's context (so the
// hook deadline is checked before it starts, as for any plugin), and its
// plugin_timeout is checked when it returns: a failure returned after
// plugin_timeout is a timeout, as the timer would have made it; a result
// is kept, as it was under a timer (a built-in does not look at its
// context). Being called on the run's goroutine, a serial (sequential,
// transform, audit) plugin that cannot block also gets the request's plugin
// context without the copies that let other plugins' calls outlive a
// change to it: it must not modify or keep it. When no plugin of a hook can
// block (fire_and_forget ones aside, which run on their own context), the
// hook deadline itself arms no timer either: the hook's context reads the
// clock when asked for its error, and arms a timer only if something waits
// for it (Done), so a plugin declared non-blocking wrongly is still cut at
// the deadline. Which plugins cannot block is asked once per generation
// of the plugin set; every plugin, blocking or not, still runs through the
// same phases, conditions, on_error, Observer and invoke_hook reply.
package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Plugins is what the executor needs from the plugin pool.
type Plugins interface {
	// Invoke calls invoke_hook on the named plugin. It must return promptly
	// once ctx is done. An error means no usable reply arrived; a reply may
	// still carry a plugin-reported "error".
	Invoke(ctx context.Context, plugin string, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error)
	// Effective returns the merged plugin configs (local keys over the
	// plugin server's) and their generation, which increases whenever any
	// of them changes. It is called once per Applies and Run, so it should
	// be cheap; the executor does not modify the returned slice.
	Effective() (gen uint64, plugins []config.Plugin)
}

// NonBlocking is implemented by Plugins that run some plugins in this
// process and can hand over those that cannot block: in-process plugins
// whose invocation only computes (the built-ins of pkg/builtin, except a
// rate limiter on Redis). The executor asks once per generation of the
// plugin set, when it plans, and calls those plugins' [LocalPlugin]
// directly on the run's goroutine: without Plugins.Invoke (a pool's lookup
// by name and a client's choice of connection, which an in-process plugin
// has no use for) and without a timer of their own (see Timeouts). Plugins
// that do not implement it have none.
type NonBlocking interface {
	// NonBlocking returns plugin itself if it cannot block (its
	// InvokeHook returns without waiting on anything, on the caller's
	// goroutine), and nil for every other plugin.
	NonBlocking(plugin string) LocalPlugin
}

// LocalPlugin is a plugin that runs in this process (pkg/builtin's Conn):
// InvokeHook is Plugins.Invoke for that one plugin.
type LocalPlugin interface {
	InvokeHook(ctx context.Context, hook cpex.HookType, plugin string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error)
}

// Observer receives one call per plugin invocation, e.g. for metrics. It
// may be called from several goroutines at once and must not block.
type Observer interface {
	OnInvoke(plugin string, hook cpex.HookType, v Verdict, d time.Duration)
}

// SeriesObserver is an Observer that resolves, once per plugin and hook,
// where their invocations go: the executor resolves them when it plans
// the hooks and tells each invocation to its HookObserver, sparing the
// Observer a lookup by plugin and hook on the path of every call.
type SeriesObserver interface {
	Observer
	Series(plugin string, hook cpex.HookType) HookObserver
}

// HookObserver receives the invocations of one plugin on one hook, as
// Observer.OnInvoke would, with the same rules.
type HookObserver interface {
	Observe(v Verdict, d time.Duration)
}

// DefaultMaxBackground bounds the fire_and_forget invocations in flight.
const DefaultMaxBackground = 256

// Options configure an [Executor]. The zero value of each field is a
// sensible default.
type Options struct {
	// Settings are the plugin_settings: plugin_timeout bounds each
	// invocation; fail_on_plugin_error forces on_error fail.
	Settings config.PluginSettings
	// HookTimeout bounds a whole hook (config Extproc.HookTimeout).
	// Zero: plugin_timeout + 1 s.
	HookTimeout time.Duration
	// Logger receives the decisions: debug per plugin decision, info on a
	// block or stop, warn on failures. Payloads are never logged. The zero
	// Logger discards.
	Logger zerolog.Logger
	// IsDown reports whether an Invoke error means the plugin is known to
	// be down (e.g. errors.Is(err, pluginclient.ErrPluginDown)). Nil: never.
	IsDown func(error) bool
	// Observer, if set, is told about every invocation.
	Observer Observer
	// MaxBackground bounds the fire_and_forget invocations in flight; more
	// are dropped with a warning. Zero: DefaultMaxBackground.
	MaxBackground int
}

// Outcome is the result of running one hook.
type Outcome struct {
	// Payload is the final payload when Modified, else nil; for
	// http_auth_resolve_user, the user (httphooks.go).
	Payload  json.RawMessage
	Modified bool
	// Violation, when set, blocks the message; its PluginName is set. It
	// takes precedence over Payload.
	Violation *cpex.PluginViolation
	// RetryDelay is the blocking plugin's retry_delay_ms, bounded (see
	// [cpex.PluginResult.RetryDelay]): when the client may retry. Zero
	// without a Violation or a delay.
	RetryDelay time.Duration
	// Err, when set, refuses the message: a plugin failed under on_error
	// fail (answer JSON-RPC -32603). It takes precedence over the rest.
	Err *PluginError
}

// Executor runs hooks through the plugin chain. It is safe for concurrent
// use; call Close to wait for fire_and_forget work.
type Executor struct {
	plugins       Plugins
	opts          Options
	log           zerolog.Logger
	pluginTimeout time.Duration
	hookTimeout   time.Duration
	nonBlocking   func(plugin string) LocalPlugin                      // from Plugins, if it is a NonBlocking
	series        func(plugin string, hook cpex.HookType) HookObserver // from the Observer, if it is a SeriesObserver
	clock         monoClock                                            // durations and hook deadlines

	snap     atomic.Pointer[snapshot]
	disabled atomic.Pointer[map[string]bool] // copy on write, under mu
	runs     sync.Pool                       // of *run: a run's state is half a KiB, zeroed for each Run anyway

	bgCtx    context.Context // parent of fire_and_forget invocations
	bgCancel context.CancelFunc

	mu         sync.Mutex
	closed     bool
	active     int           // fire_and_forget goroutines running
	idle       chan struct{} // closed once closed && active == 0
	idleClosed bool
}

// New returns an Executor over plugins.
func New(plugins Plugins, opts Options) *Executor {
	if opts.MaxBackground <= 0 {
		opts.MaxBackground = DefaultMaxBackground
	}
	e := &Executor{
		plugins:       plugins,
		opts:          opts,
		log:           opts.Logger,
		pluginTimeout: opts.Settings.Timeout(),
		hookTimeout:   opts.HookTimeout,
		clock:         newMonoClock(),
		idle:          make(chan struct{}),
	}
	if e.hookTimeout <= 0 {
		e.hookTimeout = e.pluginTimeout + config.DefaultHookTimeoutMargin
	}
	if nb, ok := plugins.(NonBlocking); ok {
		e.nonBlocking = nb.NonBlocking
	}
	if so, ok := opts.Observer.(SeriesObserver); ok {
		e.series = so.Series
	}
	e.bgCtx, e.bgCancel = context.WithCancel(context.Background())
	return e
}

// generationer is implemented by Plugins that can report their generation
// without copying their configs (pluginclient.Pool does); the executor then
// calls Effective only when the generation changed.
type generationer interface{ Generation() uint64 }

// snapshot returns the plan for the current generation of plugins.
func (e *Executor) snapshot() *snapshot {
	if g, ok := e.plugins.(generationer); ok {
		if s := e.snap.Load(); s != nil && s.gen == g.Generation() {
			return s
		}
	}
	gen, plugins := e.plugins.Effective()
	if s := e.snap.Load(); s != nil && s.gen == gen {
		return s
	}
	s := buildSnapshot(gen, plugins, e.opts.Settings, e.nonBlocking, e.series)
	e.snap.Store(s)
	return s
}

// Applies reports whether any plugin that is not disabled (by mode or at
// run time) has hook, whatever its conditions. The plan is cached per
// generation, so this is cheap enough to call per request.
func (e *Executor) Applies(hook cpex.HookType) bool {
	for range e.enabled(hook) {
		return true
	}
	return false
}

// AppliesTo reports whether any plugin would run on hook for this message:
// it has the hook, is not disabled, and its conditions match g and t. The
// processor asks before building a payload, so traffic no plugin's
// conditions select costs no payload work and no response inspection.
func (e *Executor) AppliesTo(hook cpex.HookType, g *cpex.GlobalContext, t Target) bool {
	users := lazyUsers{user: g.User}
	for en := range e.enabled(hook) {
		if matches(en.conditions, g, t, users.get) {
			return true // Run will account for every plugin
		}
	}
	// No plugin runs: each one that has the hook was skipped by its
	// conditions (or is disabled).
	for en := range e.enabled(hook) {
		e.observe(en, hook, Skipped, 0)
	}
	return false
}

// enabled yields the plugins planned on hook that are not disabled at run
// time, phase by phase.
func (e *Executor) enabled(hook cpex.HookType) iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		hp := e.snapshot().hooks[hook]
		if hp == nil {
			return
		}
		for _, ph := range hp.phases {
			for _, en := range ph {
				if !e.isDisabled(en.key) && !yield(en) {
					return
				}
			}
		}
	}
}

func (e *Executor) isDisabled(key string) bool {
	m := e.disabled.Load()
	return m != nil && (*m)[key]
}

// disable stops calling a plugin; it reports whether it was enabled.
func (e *Executor) disable(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.disabled.Load()
	if old != nil && (*old)[key] {
		return false
	}
	m := map[string]bool{key: true}
	if old != nil {
		for k := range *old {
			m[k] = true
		}
	}
	e.disabled.Store(&m)
	return true
}

// Run runs hook on payload through the plugins that have it and returns
// the verdict. rc carries the plugin context across the hooks of one
// request (nil: a fresh one); t names the tool, prompt or resource for
// conditions. Run never returns before its own invocations end; only
// fire_and_forget work outlives it (see Close).
func (e *Executor) Run(ctx context.Context, hook cpex.HookType, payload json.RawMessage, rc *RequestContext, t Target) Outcome {
	hp := e.snapshot().hooks[hook]
	if hp == nil {
		return Outcome{}
	}
	if rc == nil {
		rc = NewRequestContext(cpex.GlobalContext{})
	}
	r, _ := e.runs.Get().(*run)
	if r == nil {
		r = new(run)
	}
	defer e.runs.Put(r)
	// Every field is set: the run may have served an earlier Run. Nothing
	// keeps r once Run returns (fire_and_forget work gets copies).
	*r = run{
		e:      e,
		hook:   hook,
		rc:     rc,
		target: t,
		users:  lazyUsers{user: rc.Global.User},
		at:     e.clock.now(),
		cur:    payload,
		log:    newRunLog(&e.log, hook, rc.Global.RequestID),
	}
	if hp.nonBlocking { // see Timeouts
		r.deadline.init(ctx, e.hookTimeout, e.clock, r.at)
		defer r.deadline.stop()
		ctx = &r.deadline
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, e.hookTimeout)
		defer cancel()
	}
	r.runSerial(ctx, hp)
	if !r.halted() {
		r.runConcurrent(ctx, hp.phases[phaseConcurrent])
	}
	if r.err == nil {
		r.fireAndForget(hp.phases[phaseFireAndForget])
	}
	out := Outcome{Violation: r.violation, RetryDelay: r.retryDelay, Err: r.err}
	if r.modified {
		out.Payload, out.Modified = r.cur, true
		if r.result != nil {
			out.Payload = r.result
		}
	}
	return out
}

// Close stops starting fire_and_forget work and waits for the running work
// until ctx is done; then it cancels what still runs and returns ctx's
// error (the cancelled invocations end on their own shortly after).
func (e *Executor) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.closeIdleLocked()
	e.mu.Unlock()
	defer e.bgCancel()
	select {
	case <-e.idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("close executor: fire_and_forget work still running: %w", ctx.Err())
	}
}

func (e *Executor) closeIdleLocked() {
	if e.closed && e.active == 0 && !e.idleClosed {
		e.idleClosed = true
		close(e.idle)
	}
}

// spawn runs f in an owned background goroutine; it reports false when the
// executor is closed or too much is in flight.
func (e *Executor) spawn(f func(ctx context.Context)) bool {
	e.mu.Lock()
	if e.closed || e.active >= e.opts.MaxBackground {
		e.mu.Unlock()
		return false
	}
	e.active++
	e.mu.Unlock()
	go func() {
		defer func() {
			e.mu.Lock()
			e.active--
			e.closeIdleLocked()
			e.mu.Unlock()
		}()
		f(e.bgCtx)
	}()
	return true
}

// observe tells the Observer of one invocation of en on hook.
func (e *Executor) observe(en *entry, hook cpex.HookType, v Verdict, d time.Duration) {
	switch {
	case en.series != nil:
		en.series.Observe(v, d)
	case e.opts.Observer != nil:
		e.opts.Observer.OnInvoke(en.name, hook, v, d)
	}
}

// reply is the result of one invocation.
type reply struct {
	result *cpex.PluginResult
	ctx    *cpex.PluginContext
	err    *PluginError
	dur    time.Duration
	end    time.Duration // the executor clock's reading when it ended
}

// invoke calls one plugin under the per-plugin timeout, from start, a
// reading of the executor's clock. It touches no per-request state, so it
// may run on any goroutine.
func (e *Executor) invoke(ctx context.Context, en *entry, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext, secrets []string, start time.Duration) reply {
	if err := errAt(ctx, start); err != nil {
		cause := err
		if errors.Is(err, context.DeadlineExceeded) {
			cause = fmt.Errorf("%w: %w", ErrHookDeadline, err)
		}
		return reply{err: &PluginError{Plugin: en.name, Hook: hook, Cause: cause, Timeout: errors.Is(err, context.DeadlineExceeded)}, end: start}
	}
	cctx := ctx
	var rep *cpex.InvokeHookReply
	var err error
	if en.local != nil { // a timer could not stop it: see Timeouts
		rep, err = en.local.InvokeHook(ctx, hook, en.name, payload, pctx)
	} else {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, e.pluginTimeout)
		defer cancel()
		rep, err = e.plugins.Invoke(cctx, en.name, hook, payload, pctx)
	}
	end := e.clock.now()
	r := reply{dur: end - start, end: end}
	pe := replyError(rep, err, err != nil && e.opts.IsDown != nil && e.opts.IsDown(err))
	if pe == nil {
		r.result, r.ctx = rep.Result, rep.Context
		return r
	}
	pe.Plugin, pe.Hook, pe.own = en.name, hook, ctx.Err() == nil
	switch {
	case pe.Timeout:
	case err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded):
		pe.Timeout = true
		pe.Cause = fmt.Errorf("%w (%w)", err, context.DeadlineExceeded)
	case en.local != nil && r.dur >= e.pluginTimeout:
		// The failure a per-plugin timer would have turned into one.
		pe.Timeout = true
		pe.Cause = fmt.Errorf("%w (after %v: %w)", pe.Cause, r.dur, context.DeadlineExceeded)
	}
	pe.redact(secrets)
	r.err = pe
	return r
}

// Version changes whenever Applies may answer differently: with the
// generation of the plugins and with each plugin disabled at run time
// (the disabled set only grows).
func (e *Executor) Version() uint64 {
	gen := e.snapshot().gen
	var n uint64
	if m := e.disabled.Load(); m != nil {
		n = uint64(len(*m))
	}
	return gen<<20 | n&(1<<20-1)
}
