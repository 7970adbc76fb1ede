package executor

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Sentinel causes of a [PluginError], for errors.Is.
var (
	// ErrPluginReported: the plugin answered invoke_hook with an "error"
	// (a cpex PluginErrorModel, kept in PluginError.Model).
	ErrPluginReported = errors.New("plugin reported an error")
	// ErrInvalidReply: the reply is not a cpex reply (e.g. neither "result"
	// nor "error"). It is cpex.ErrInvalidReply, which plugin clients wrap
	// for the same failures they find themselves.
	ErrInvalidReply = cpex.ErrInvalidReply
	// ErrInvalidPayload: a modified_payload that does not have the shape of
	// the hook's payload (docs/plugin-protocol.md §2).
	ErrInvalidPayload = errors.New("modified payload does not fit the hook")
	// ErrHookDeadline: the whole-hook deadline passed before the plugin was
	// called.
	ErrHookDeadline = errors.New("hook deadline passed before the plugin ran")
)

// PluginError is a failed plugin invocation: a transport error, a timeout,
// an error reply, an invalid reply or an invalid modified payload.
type PluginError struct {
	Plugin string
	Hook   cpex.HookType
	Cause  error
	// Down: the plugin is known to be down (Options.IsDown said so, e.g. an
	// open circuit); it was not waited on.
	Down bool
	// Timeout: the per-plugin timeout or the hook deadline passed.
	Timeout bool
	// Model is the error the plugin reported, when it reported one.
	Model *cpex.PluginErrorModel

	// own: the failure is the plugin's, not the request's (whose context
	// ended or whose hook deadline passed); only such failures disable a
	// plugin under on_error: disable.
	own bool
}

// Error formats e as "plugin pii: tool_pre_invoke: <cause>".
func (e *PluginError) Error() string {
	return fmt.Sprintf("plugin %s: %s: %v", e.Plugin, e.Hook, e.Cause)
}

// Unwrap returns the cause.
func (e *PluginError) Unwrap() error { return e.Cause }

// redact hides secrets in e's texts: a plugin or its server may echo its
// input back (a validation error quoting the payload), and an HTTP hook's
// payload carries the caller's credentials.
func (e *PluginError) redact(secrets []string) {
	if len(secrets) == 0 {
		return
	}
	e.Cause = redactedError{err: e.Cause, secrets: secrets}
	if e.Model != nil {
		e.Model.Message = redactText(e.Model.Message, secrets)
	}
}

// redactedError is err whose text shows none of secrets; errors.Is and As
// see err.
type redactedError struct {
	err     error
	secrets []string
}

func (r redactedError) Error() string { return redactText(r.err.Error(), r.secrets) }

func (r redactedError) Unwrap() error { return r.err }

// redactText replaces every secret in s by "[redacted]".
func redactText(s string, secrets []string) string {
	for _, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}
