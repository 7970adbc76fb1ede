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
	hp := e.snapshot().hooks[hook]
	if hp == nil {
		return false
	}
	for _, ph := range hp.phases {
		for _, en := range ph {
			if e.isDisabled(en.key) || en.onError != config.OnErrorFail {
				continue
			}
			if en.mode == config.ModeAudit || en.mode == config.ModeFireAndForget {
				continue
			}
			return true
		}
	}
	return false
}
