// Package plugin is what every built-in plugin shares: the [Plugin]
// interface the sidecar invokes in-process, the [Spec] that describes one
// (its ContextForge class paths, the hooks it implements, its config keys),
// decoding of a plugin's config: block with every key accounted for, and
// the small result builders of the cpex protocol.
//
// It imports neither the sidecar's config nor its plugin client, so that
// both can depend on the built-in plugins.
package plugin

import (
	"context"
	"encoding/json"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Plugin is one built-in plugin, configured from one plugin entry. It is
// safe for concurrent use; everything the config decided (compiled
// patterns, word lists, limits) is prepared by its constructor, never per
// call.
type Plugin interface {
	// Invoke runs hook on payload (the JSON of the hook's payload, as an
	// external plugin receives it). A nil result with a nil error means
	// "continue unchanged". An error is a plugin failure: the entry's
	// on_error decides. Hooks the plugin does not implement continue
	// unchanged, as a cpex Plugin's default hook does. payload and pctx
	// (whose maps may be the request's own, or nil) are read-only and are
	// not kept after Invoke returns.
	Invoke(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.PluginResult, error)
	// Close releases what the plugin holds (a Redis client); calls after
	// Close may fail.
	Close() error
}

// NonBlocking is implemented by a [Plugin] whose Invoke may be called
// without a timer: it only computes, on the caller's goroutine, and waits
// on nothing (no I/O; no lock held longer than a computation). The
// executor then calls it without arming a timer per invocation
// (pkg/executor, Timeouts). A plugin that does not implement it, or whose
// NonBlocking reports false (a rate limiter on Redis), is called under a
// timer, as an external plugin is.
type NonBlocking interface {
	NonBlocking() bool
}

// Spec describes one built-in plugin.
type Spec struct {
	// Name is the plugin's short name, as in ContextForge's plugins/
	// folder ("pii_filter").
	Name string
	// Kinds are the class paths ContextForge and cpex-plugins configs name
	// the plugin by.
	Kinds []string
	// Hooks are the hooks the plugin implements; they are also the hooks of
	// an entry that lists none (as the plugin's manifest would supply them).
	Hooks []cpex.HookType
	// Keys are the plugin's documented config keys, supported or not.
	Keys []Key
	// New builds the plugin from its config: block. Issues are what the
	// config check reports (unknown and unsupported keys as warnings); an
	// error means the config cannot run.
	New func(cfg map[string]any) (Plugin, []Issue, error)
}

// Implements reports whether the plugin implements hook.
func (s *Spec) Implements(hook cpex.HookType) bool {
	for _, h := range s.Hooks {
		if h == hook {
			return true
		}
	}
	return false
}

// Key is one documented config key of a plugin.
type Key struct {
	Name string
	// Supported is false for a key the sidecar accepts but does not act on;
	// setting it gives a warning.
	Supported bool
	// Note says what the key does here, or why it is not supported.
	Note string
}

// Issue is one finding about a plugin's config: a warning, or (Warning
// false) a problem that stops the config from loading.
type Issue struct {
	// Field is the path of the key under config: ("words[2].search").
	Field   string
	Message string
	Warning bool
}

// Problem returns an Issue that stops the config.
func Problem(field, msg string) Issue { return Issue{Field: field, Message: msg} }

// Warning returns an Issue that is only reported.
func Warning(field, msg string) Issue { return Issue{Field: field, Message: msg, Warning: true} }
