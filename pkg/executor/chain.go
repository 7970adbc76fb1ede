package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// run is the state of one Run.
type run struct {
	e      *Executor
	hook   cpex.HookType
	rc     *RequestContext
	target Target
	log    runLog

	cur        json.RawMessage // the payload as the chain has made it
	result     json.RawMessage // a hook's answer that is not a payload (httphooks.go)
	modified   bool
	violation  *cpex.PluginViolation
	retryDelay time.Duration // the blocking plugin's retry_delay_ms
	err        *PluginError
	stoppedBy  string
	users      lazyUsers
	view       cpex.PluginContext // what view lends the serial plugins that cannot block
	deadline   clockDeadline      // the hook deadline when the hook's plugins cannot block
	// at is the executor clock's last reading: when the run began, then
	// when its last serial invocation ended. The next serial invocation
	// starts from it rather than reading the clock again (a read costs
	// as much as an in-process plugin's prefilter), so its duration
	// includes the bookkeeping since, well under a microsecond.
	at time.Duration
}

func (r *run) halted() bool { return r.violation != nil || r.err != nil || r.stoppedBy != "" }

// runLog starts the log events of one run: the executor's logger with the
// run's hook and request_id. Each event adds the two fields itself instead
// of a logger made per run, so that a run logging nothing (the levels are
// off) costs nothing; the lines are the same.
type runLog struct {
	log       *zerolog.Logger
	hook      cpex.HookType
	requestID string
	// debug: debug lines may be written. Off, a run asks nothing of the
	// logger for the debug line of each plugin.
	debug bool
}

func newRunLog(log *zerolog.Logger, hook cpex.HookType, requestID string) runLog {
	lvl := max(log.GetLevel(), zerolog.GlobalLevel())
	return runLog{log: log, hook: hook, requestID: requestID, debug: lvl <= zerolog.DebugLevel}
}

func (l runLog) event(level zerolog.Level) *zerolog.Event {
	return l.log.WithLevel(level).Str("hook", string(l.hook)).Str("request_id", l.requestID)
}

// Debug starts a debug line: nil (which writes nothing) when debug lines
// are off.
func (l runLog) Debug() *zerolog.Event {
	if !l.debug {
		return nil
	}
	return l.event(zerolog.DebugLevel)
}
func (l runLog) Info() *zerolog.Event { return l.event(zerolog.InfoLevel) }
func (l runLog) Warn() *zerolog.Event { return l.event(zerolog.WarnLevel) }

// lazyUsers computes the user strings conditions match against once, and
// only when a condition needs them.
type lazyUsers struct {
	user  json.RawMessage
	users []string
	done  bool
}

func (l *lazyUsers) get() []string {
	if !l.done {
		l.users, l.done = userStrings(l.user), true
	}
	return l.users
}

// eligible reports whether en runs in this run.
func (r *run) eligible(en *entry) bool {
	if r.e.isDisabled(en.key) {
		r.log.Debug().Str("plugin", en.name).Stringer("outcome", Skipped).Msg("plugin disabled after an earlier failure")
		return false
	}
	if !matches(en.conditions, &r.rc.Global, r.target, r.users.get) {
		r.log.Debug().Str("plugin", en.name).Stringer("outcome", Skipped).Msg("plugin conditions do not match")
		r.observe(en, Skipped, 0)
		return false
	}
	return true
}

// observe tells the executor's Observer, and the request's OnInvoke, of
// one invocation's verdict.
func (r *run) observe(en *entry, v Verdict, d time.Duration) {
	r.e.observe(en, r.hook, v, d)
	if f := r.rc.OnInvoke; f != nil && v != Skipped {
		f(en.name, r.hook, v, d)
	}
}

// runSerial runs the sequential, transform and audit phases.
func (r *run) runSerial(ctx context.Context, hp *hookPlan) {
	for _, ph := range []int{phaseSequential, phaseTransform, phaseAudit} {
		for _, en := range hp.phases[ph] {
			if !r.eligible(en) {
				continue
			}
			pctx := &r.view
			if en.local != nil {
				r.rc.view(en.key, pctx)
			} else {
				pctx = r.rc.pluginContext(en.key)
			}
			rep := r.e.invoke(ctx, en, r.hook, r.cur, pctx, r.rc.Secrets, r.at)
			r.at = rep.end
			r.handle(en, rep)
			if r.halted() {
				return
			}
		}
	}
}

// runConcurrent runs the concurrent phase: all eligible plugins at once on
// the current payload; the first block, stop or failing policy wins and
// cancels the others. Every goroutine has ended when it returns.
func (r *run) runConcurrent(ctx context.Context, entries []*entry) {
	var list []*entry
	for _, en := range entries {
		if r.eligible(en) {
			list = append(list, en)
		}
	}
	switch len(list) {
	case 0:
		return
	case 1: // nothing to run in parallel with
		en := list[0]
		r.handle(en, r.e.invoke(ctx, en, r.hook, r.cur, r.rc.pluginContext(en.key), r.rc.Secrets, r.e.clock.now()))
		return
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type done struct {
		en  *entry
		rep reply
	}
	results := make(chan done, len(list))
	for _, en := range list {
		pctx := r.rc.pluginContext(en.key)
		go func(payload json.RawMessage) {
			results <- done{en, r.e.invoke(cctx, en, r.hook, payload, pctx, r.rc.Secrets, r.e.clock.now())}
		}(r.cur)
	}
	for range list {
		d := <-results
		if r.halted() {
			continue // decided: the rest were cancelled and do not count
		}
		r.handle(d.en, d.rep)
		if r.halted() {
			cancel()
		}
	}
}

// handle applies one reply under the plugin's mode and on_error.
func (r *run) handle(en *entry, rep reply) {
	if rep.err != nil {
		r.failed(en, rep.err, rep.dur)
		return
	}
	r.rc.carry(en.name, en.mode, rep.ctx)
	res := rep.result
	mayBlock, mayModify := canBlock(en.mode), canModify(en.mode)
	logd := func(v Verdict, msg string) {
		if !r.log.debug {
			return
		}
		r.log.Debug().Str("plugin", en.name).Str("mode", string(en.mode)).Stringer("outcome", v).Dur("duration", rep.dur).Msg(msg)
	}

	if !res.Continue() && mayBlock {
		if res.Violation != nil {
			v := *res.Violation
			v.PluginName = en.name
			r.violation, r.retryDelay = &v, res.RetryDelay()
			r.observe(en, Blocked, rep.dur)
			r.log.Debug().Str("plugin", en.name).Str("mode", string(en.mode)).Str("code", v.Code).Str("reason", v.Reason).
				Dur("duration", rep.dur).Msg("plugin blocked the message")
			return
		}
		r.stoppedBy = en.name
		r.observe(en, Stopped, rep.dur)
		r.log.Info().Str("plugin", en.name).Str("mode", string(en.mode)).Dur("duration", rep.dur).
			Msg("plugin stopped the chain without a violation; the message goes on")
		return
	}
	if r.deny(en, res, rep.dur, mayBlock) {
		return
	}

	outcome := Allowed
	if res.Violation != nil {
		outcome = ViolationNotEnforced
		msg := "violation not enforced: continue_processing is true"
		if !res.Continue() {
			msg = "violation not enforced: mode " + string(en.mode) + " cannot block"
		}
		r.log.Warn().Str("plugin", en.name).Str("mode", string(en.mode)).Str("code", res.Violation.Code).
			Str("reason", res.Violation.Reason).Msg(msg)
	} else if !res.Continue() {
		outcome = Stopped
		logd(outcome, "continue_processing false ignored: mode cannot stop the chain")
	}

	if res.Modified() {
		if !mayModify {
			logd(outcome, "modified payload discarded: mode cannot modify")
		} else if changed, err := r.fold(res.ModifiedPayload); err != nil {
			r.failed(en, &PluginError{Plugin: en.name, Hook: r.hook, Cause: err, own: true}, rep.dur)
			return
		} else if changed {
			r.modified = true
			if outcome == Allowed {
				outcome = Modified
			}
		}
	}
	r.observe(en, outcome, rep.dur)
	logd(outcome, "plugin decision")
}

// failed applies the plugin's on_error to a failure.
func (r *run) failed(en *entry, pe *PluginError, d time.Duration) {
	outcome := pe.verdict()
	r.observe(en, outcome, d)
	ev := r.log.Warn().Str("plugin", en.name).Str("mode", string(en.mode)).Stringer("outcome", outcome).
		Str("on_error", string(en.onError)).Dur("duration", d).Err(pe.Cause)
	switch en.onError {
	case config.OnErrorFail:
		r.err = pe
		ev.Msg("plugin failed: refusing the message (on_error fail)")
	case config.OnErrorDisable:
		if pe.own && r.e.disable(en.key) {
			ev.Msg("plugin failed: disabled, going on (on_error disable)")
			return
		}
		ev.Msg("plugin failed: going on (on_error disable)")
	default:
		ev.Msg("plugin failed: going on (on_error ignore)")
	}
}

// fireAndForget starts the fire_and_forget plugins on snapshots of the
// final payload and context.
func (r *run) fireAndForget(entries []*entry) {
	for _, en := range entries {
		if !r.eligible(en) {
			continue
		}
		e, hook, log := r.e, r.hook, r.log
		payload, pctx, secrets := bytes.Clone(r.cur), r.rc.pluginContext(en.key), r.rc.Secrets
		started := e.spawn(func(ctx context.Context) {
			rep := e.invoke(ctx, en, hook, payload, pctx, secrets, e.clock.now())
			if pe := rep.err; pe != nil {
				outcome := pe.verdict()
				e.observe(en, hook, outcome, rep.dur)
				ev := log.Warn().Str("plugin", en.name).Str("mode", string(en.mode)).Stringer("outcome", outcome).Err(pe.Cause)
				if en.onError == config.OnErrorDisable && pe.own && e.disable(en.key) {
					ev.Msg("fire_and_forget plugin failed: disabled")
					return
				}
				ev.Msg("fire_and_forget plugin failed (ignored)")
				return
			}
			outcome := Allowed
			if v := rep.result.Violation; v != nil {
				outcome = ViolationNotEnforced
				log.Info().Str("plugin", en.name).Str("code", v.Code).Str("reason", v.Reason).
					Msg("fire_and_forget plugin reported a violation (not enforced)")
			}
			e.observe(en, hook, outcome, rep.dur)
			log.Debug().Str("plugin", en.name).Str("mode", string(en.mode)).Stringer("outcome", outcome).
				Dur("duration", rep.dur).Msg("plugin decision")
		})
		if !started {
			e.observe(en, hook, Dropped, 0)
			log.Warn().Str("plugin", en.name).Msg("fire_and_forget plugin not started: executor closing or too much in flight")
		}
	}
}
