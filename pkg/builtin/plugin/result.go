package plugin

import (
	"encoding/json"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Block returns a result that stops the message with v.
func Block(v *cpex.PluginViolation) *cpex.PluginResult {
	stop := false
	return &cpex.PluginResult{ContinueProcessing: &stop, Violation: v}
}

// Modified returns a result that continues with payload.
func Modified(payload json.RawMessage) *cpex.PluginResult {
	return &cpex.PluginResult{ModifiedPayload: payload}
}
