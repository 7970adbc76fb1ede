package executor

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestReplyVerdict: an answer classified as the plugin gave it, before its
// mode applies. A violation with continue_processing true is never Blocked;
// an invalid reply is Invalid, not Errored.
func TestReplyVerdict(t *testing.T) {
	no := false
	v := &cpex.PluginViolation{Code: "X"}
	tests := []struct {
		name string
		rep  *cpex.InvokeHookReply
		err  error
		down bool
		want Verdict
	}{
		{"allow", &cpex.InvokeHookReply{Result: &cpex.PluginResult{}}, nil, false, Allowed},
		{"modify", &cpex.InvokeHookReply{Result: &cpex.PluginResult{ModifiedPayload: []byte(`{}`)}}, nil, false, Modified},
		{"block", &cpex.InvokeHookReply{Result: &cpex.PluginResult{ContinueProcessing: &no, Violation: v}}, nil, false, Blocked},
		{"violation, continue", &cpex.InvokeHookReply{Result: &cpex.PluginResult{Violation: v}}, nil, false, ViolationNotEnforced},
		{"stop", &cpex.InvokeHookReply{Result: &cpex.PluginResult{ContinueProcessing: &no}}, nil, false, Stopped},
		{"plugin error", &cpex.InvokeHookReply{Error: &cpex.PluginErrorModel{Message: "m"}}, nil, false, Errored},
		{"neither result nor error", &cpex.InvokeHookReply{}, nil, false, Invalid},
		{"no reply", nil, nil, false, Invalid},
		{"client found the reply invalid", nil, fmt.Errorf("%w: tool error", cpex.ErrInvalidReply), false, Invalid},
		{"transport", nil, errors.New("connection refused"), false, Errored},
		{"timeout", nil, fmt.Errorf("call: %w", context.DeadlineExceeded), false, Timeout},
		{"down", nil, errors.New("circuit open"), true, Down},
	}
	for _, tt := range tests {
		if got := ReplyVerdict(tt.rep, tt.err, tt.down); got != tt.want {
			t.Errorf("%s: ReplyVerdict = %v, want %v", tt.name, got, tt.want)
		}
	}
	if s := Verdict(99).String(); s != "verdict(99)" {
		t.Errorf("unknown verdict String = %q", s)
	}
}

// TestVerdictLabels: every verdict has a distinct, non-empty label.
func TestVerdictLabels(t *testing.T) {
	seen := map[string]Verdict{}
	for v := Verdict(0); v < NumVerdicts; v++ {
		l := v.String()
		if prev, ok := seen[l]; ok || l == "" {
			t.Errorf("verdict %d label %q (also verdict %d)", v, l, prev)
		}
		seen[l] = v
	}
}

// A mode that cannot block turns a block into a violation not enforced; one
// that cannot modify discards a modification; other verdicts stand.
func TestModeVerdict(t *testing.T) {
	for _, tc := range []struct {
		v    Verdict
		mode config.Mode
		want Verdict
	}{
		{Blocked, config.ModeSequential, Blocked},
		{Blocked, config.ModeConcurrent, Blocked},
		{Blocked, config.ModeTransform, ViolationNotEnforced},
		{Blocked, config.ModeAudit, ViolationNotEnforced},
		{Blocked, config.ModeFireAndForget, ViolationNotEnforced},
		{Modified, config.ModeSequential, Modified},
		{Modified, config.ModeTransform, Modified},
		{Modified, config.ModeAudit, Allowed},
		{Modified, config.ModeConcurrent, Allowed},
		{Stopped, config.ModeAudit, Stopped},
		{Errored, config.ModeAudit, Errored},
	} {
		if got := ModeVerdict(tc.v, tc.mode); got != tc.want {
			t.Errorf("ModeVerdict(%v, %s) = %v, want %v", tc.v, tc.mode, got, tc.want)
		}
	}
}
