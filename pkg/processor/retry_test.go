package processor

import (
	"context"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/executor"
)

// TestRetryDelayRefusal: a plugin that blocks with retry_delay_ms gives
// a refusal whose Retry-After is the delay in seconds rounded up, capped
// at an hour, and whose JSON-RPC error data carries the bounded delay in
// milliseconds; a Retry-After the plugin set itself is kept, and its
// header map is not changed.
func TestRetryDelayRefusal(t *testing.T) {
	ms := func(f float64) *float64 { return &f }
	tests := []struct {
		name      string
		delay     *float64
		headers   map[string]string
		wantAfter string // "" for no Retry-After header
		wantMS    any    // nil for no retry_delay_ms in data
	}{
		{"none", nil, nil, "", nil},
		{"zero", ms(0), nil, "", nil},
		{"negative", ms(-5), nil, "", nil},
		{"under a second rounds up", ms(1), nil, "1", int64(1)},
		{"fraction of a millisecond rounds up", ms(1500.2), nil, "2", int64(1501)},
		{"whole seconds", ms(30000), nil, "30", int64(30000)},
		{"capped at an hour", ms(1e12), nil, "3600", int64(3600000)},
		{"other headers kept", ms(2000), map[string]string{"X-Limit": "60"}, "2", int64(2000)},
		{"plugin's own Retry-After wins", ms(2000), map[string]string{"retry-after": "9"}, "9", int64(2000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := cpex.PluginResult{RetryDelayMS: tt.delay}
			orig := len(tt.headers)
			out := executor.Outcome{
				Violation:  &cpex.PluginViolation{Reason: "Rate limit exceeded", Code: "RATE_LIMIT", PluginName: "rl", HTTPHeaders: tt.headers},
				RetryDelay: res.RetryDelay(),
			}
			r, ok := (&exchange{ctx: context.Background(), snap: &Snapshot{}}).refusalOf(out, 0, []byte("1"), cpex.ToolPreInvoke)
			if !ok {
				t.Fatal("no refusal")
			}
			after := ""
			for k, v := range r.headers {
				if k == "Retry-After" || k == "retry-after" {
					after = v
				}
			}
			if after != tt.wantAfter {
				t.Errorf("Retry-After = %q, want %q (headers %v)", after, tt.wantAfter, r.headers)
			}
			if got := r.data["retry_delay_ms"]; got != tt.wantMS {
				t.Errorf("data retry_delay_ms = %v (%T), want %v", got, got, tt.wantMS)
			}
			if len(tt.headers) != orig {
				t.Errorf("the violation's headers were changed: %v", tt.headers)
			}
			if tt.headers != nil && tt.headers["X-Limit"] != "" && r.headers["X-Limit"] != "60" {
				t.Errorf("headers = %v, want X-Limit kept", r.headers)
			}
		})
	}
}
