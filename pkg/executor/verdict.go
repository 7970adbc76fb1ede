package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Verdict is what became of one plugin invocation. Metrics, logs and
// traces all use it; its String is the metric label (outcome="...").
type Verdict int

// The verdicts. Only Blocked refused the message because of a violation; a
// violation that did not block is ViolationNotEnforced.
const (
	Allowed              Verdict = iota // a result without modification or violation
	Modified                            // a modified payload that the chain kept
	Blocked                             // a violation that blocked the message
	ViolationNotEnforced                // a violation logged only: the mode cannot block (transform, audit, fire_and_forget) or continue_processing was true
	Stopped                             // continue_processing false without a violation
	Errored                             // a transport error or a plugin-reported error
	Timeout                             // the per-plugin timeout or the hook deadline passed
	Down                                // the plugin is known to be down; it was not waited on
	Invalid                             // an unusable reply (ErrInvalidReply) or modified payload (ErrInvalidPayload)
	Dropped                             // a fire_and_forget invocation not started (closing, or too many in flight)
	Skipped                             // the plugin's conditions do not match this message

	// NumVerdicts is the number of verdicts: every one above is below it,
	// so it sizes an array indexed by Verdict.
	NumVerdicts
)

var verdictLabels = [NumVerdicts]string{
	Allowed:              "allow",
	Modified:             "modify",
	Blocked:              "block",
	ViolationNotEnforced: "violation_not_enforced",
	Stopped:              "stop",
	Errored:              "error",
	Timeout:              "timeout",
	Down:                 "down",
	Invalid:              "invalid",
	Dropped:              "dropped",
	Skipped:              "skipped",
}

// String returns the verdict's metric label.
func (v Verdict) String() string {
	if v < 0 || v >= NumVerdicts {
		return fmt.Sprintf("verdict(%d)", int(v))
	}
	return verdictLabels[v]
}

// Reached reports whether the invocation reached the plugin (and so has a
// duration worth timing).
func (v Verdict) Reached() bool { return v != Down && v != Skipped && v != Dropped }

// ReplyVerdict classifies one invoke_hook answer as the plugin gave it,
// before its mode applies ([ModeVerdict]): a violation with
// continue_processing false is Blocked here. down reports that err means
// the plugin is known to be down.
func ReplyVerdict(rep *cpex.InvokeHookReply, err error, down bool) Verdict {
	if pe := replyError(rep, err, down); pe != nil {
		return pe.verdict()
	}
	res := rep.Result
	switch {
	case res.Violation != nil && !res.Continue():
		return Blocked
	case res.Violation != nil:
		return ViolationNotEnforced
	case !res.Continue():
		return Stopped
	case res.Modified():
		return Modified
	}
	return Allowed
}

// canBlock reports whether a plugin in mode m may refuse a message
// (docs/plugin-protocol.md §4.1).
func canBlock(m config.Mode) bool { return m == config.ModeSequential || m == config.ModeConcurrent }

// canModify reports whether a plugin in mode m may change the payload.
func canModify(m config.Mode) bool { return m == config.ModeSequential || m == config.ModeTransform }

// ModeVerdict is what an answer classified by [ReplyVerdict] counts as for
// a plugin in mode m, before the chain's own checks (a modified payload
// equal to the current one, or one that does not fit the hook): a block by a
// plugin whose mode cannot block is ViolationNotEnforced, and a
// modification by one whose mode cannot modify is discarded (Allowed). The
// executor's metrics and the invocation spans both use it, so they agree.
func ModeVerdict(v Verdict, m config.Mode) Verdict {
	switch {
	case v == Blocked && !canBlock(m):
		return ViolationNotEnforced
	case v == Modified && !canModify(m):
		return Allowed
	}
	return v
}

// replyError returns the failure an answer stands for, or nil when it
// carries a result (without allocating: that is every invocation's path).
// Plugin and Hook are left for the caller.
func replyError(rep *cpex.InvokeHookReply, err error, down bool) *PluginError {
	switch {
	case err != nil:
		return &PluginError{Cause: err, Down: down, Timeout: errors.Is(err, context.DeadlineExceeded)}
	case rep == nil:
		return &PluginError{Cause: fmt.Errorf("%w: no reply", ErrInvalidReply)}
	case rep.Error != nil:
		m := *rep.Error
		return &PluginError{Model: &m, Cause: fmt.Errorf("%w: %s", ErrPluginReported, describeModel(&m))}
	case rep.Result == nil:
		return &PluginError{Cause: fmt.Errorf("%w: neither result nor error", ErrInvalidReply)}
	}
	return nil
}

// verdict names a failure.
func (e *PluginError) verdict() Verdict {
	switch {
	case e.Down:
		return Down
	case e.Timeout:
		return Timeout
	case errors.Is(e.Cause, ErrInvalidReply), errors.Is(e.Cause, ErrInvalidPayload):
		return Invalid
	}
	return Errored
}

func describeModel(m *cpex.PluginErrorModel) string {
	s := m.Message
	if m.Code != "" {
		s += " (code " + m.Code + ")"
	}
	return s
}
