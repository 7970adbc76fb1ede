package executor

import (
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// FailClosed reports whether a failure to run hook at all (for example a
// message too large to inspect) must refuse the message: true when any
// enforcing plugin of the hook (one that may block or modify, i.e. not audit
// or fire_and_forget) has on_error fail.
func (e *Executor) FailClosed(hook cpex.HookType) bool {
	for en := range e.enabled(hook) {
		if en.onError == config.OnErrorFail && en.mode != config.ModeAudit && en.mode != config.ModeFireAndForget {
			return true
		}
	}
	return false
}
