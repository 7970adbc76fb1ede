package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestOutcomeRetryDelay: the retry_delay_ms of the plugin that blocks
// reaches the outcome, bounded; a violation that does not block carries
// none.
func TestOutcomeRetryDelay(t *testing.T) {
	ms := func(f float64) *float64 { return &f }
	tests := []struct {
		name   string
		mode   config.Mode
		stop   bool
		delay  *float64
		want   time.Duration
		blocks bool
	}{
		{"sequential block", config.ModeSequential, true, ms(1500), 1500 * time.Millisecond, true},
		{"concurrent block", config.ModeConcurrent, true, ms(20), 20 * time.Millisecond, true},
		{"bounded", config.ModeSequential, true, ms(1e9), cpex.MaxRetryDelay, true},
		{"block without delay", config.ModeSequential, true, nil, 0, true},
		{"audit violation does not block", config.ModeAudit, true, ms(1500), 0, false},
		{"continue_processing true does not block", config.ModeSequential, false, ms(1500), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake(plug("rl", tt.mode, 1))
			cont := !tt.stop
			f.set("rl", resultH(cpex.PluginResult{ContinueProcessing: &cont, RetryDelayMS: tt.delay,
				Violation: &cpex.PluginViolation{Reason: "Rate limit exceeded", Code: "RATE_LIMIT"}}))
			e := newExec(t, f, Options{})
			out := e.Run(context.Background(), cpex.ToolPreInvoke, json.RawMessage(toolPre), nil, Target{})
			if (out.Violation != nil) != tt.blocks || out.RetryDelay != tt.want {
				t.Errorf("violation %v, RetryDelay %v; want blocked %v, %v", out.Violation, out.RetryDelay, tt.blocks, tt.want)
			}
		})
	}
}
