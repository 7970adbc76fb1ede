package executor

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Each plugin's decision is a debug line when the logger's level lets
// debug lines through, and nothing otherwise.
func TestDecisionDebugLine(t *testing.T) {
	for _, tc := range []struct {
		level zerolog.Level
		want  bool
	}{{zerolog.DebugLevel, true}, {zerolog.TraceLevel, true}, {zerolog.InfoLevel, false}} {
		var buf bytes.Buffer
		f := newFake(plug("A", config.ModeSequential, 1, cpex.ToolPreInvoke))
		e := newExec(t, f, Options{Logger: zerolog.New(&buf).Level(tc.level)})
		e.Run(context.Background(), cpex.ToolPreInvoke, []byte(toolPre), NewRequestContext(cpex.GlobalContext{RequestID: "r1"}), Target{Name: "fetch"})
		got := buf.String()
		if has := strings.Contains(got, `"message":"plugin decision"`) && strings.Contains(got, `"request_id":"r1"`); has != tc.want {
			t.Errorf("level %v: decision line written %v, want %v:\n%s", tc.level, has, tc.want, got)
		}
	}
}
