package executor

import (
	"maps"
	"strings"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// RequestContext is the per-request plugin context: the global context the
// plugins share, plus one local context (state, metadata) per plugin, as
// cpex keeps them. Use one RequestContext for all the hooks of one request
// (pre and post), so that what a plugin stored in its pre hook reaches its
// post hook.
//
// What a plugin returns in its reply's "context" is carried to the next hook
// of the same request: its context.state and context.metadata replace its
// local context, and the keys of its context.global_context.state are merged
// into Global.State (only for sequential, transform and concurrent plugins:
// audit and fire_and_forget plugins observe, as in cpex). Fire-and-forget
// plugins get a snapshot and their replies are not carried (they finish
// after the hook, possibly after the request).
//
// A RequestContext is not safe for concurrent use: do not run two hooks of
// one request at the same time, and do not touch it during [Executor.Run].
type RequestContext struct {
	// Global is sent as context.global_context. Its State and Metadata
	// may be nil until a plugin's reply adds to them; what is sent holds
	// empty objects then (PluginContext), and a plugin that cannot block
	// reads them as empty.
	Global cpex.GlobalContext
	// Secrets are values no error of this request's invocations may show
	// (the caller's credentials, which the HTTP hooks' payloads carry):
	// each is replaced by "[redacted]" in PluginError.Cause and in the
	// reported model's message, hence in logs, spans and client errors.
	Secrets []string
	// OnInvoke, if set, is told each plugin invocation of this request's
	// hooks that reached a decision (not Skipped), on the goroutine that
	// runs the hook: the audit record of the message (fire_and_forget
	// invocations end later and are not told).
	OnInvoke func(plugin string, hook cpex.HookType, v Verdict, d time.Duration)

	locals map[string]*localContext // by lower-case plugin name
}

type localContext struct {
	state    map[string]any
	metadata map[string]any
}

// NewRequestContext returns a context for one request. The maps of g are
// kept as they are (nil ones too: PluginContext sends empty objects).
func NewRequestContext(g cpex.GlobalContext) *RequestContext {
	return &RequestContext{Global: g}
}

// PluginContext returns the context sent to plugin: its local state and
// metadata and the global context. The maps are shallow copies, so the
// caller may hand the result to another goroutine while rc changes; nested
// values are shared and must not be modified.
func (rc *RequestContext) PluginContext(plugin string) *cpex.PluginContext {
	return rc.pluginContext(strings.ToLower(plugin))
}

// pluginContext is PluginContext of the plugin whose lower-case name is
// key.
func (rc *RequestContext) pluginContext(key string) *cpex.PluginContext {
	g := rc.Global
	g.State = cloneMap(g.State)
	g.Metadata = cloneMap(g.Metadata)
	pc := &cpex.PluginContext{GlobalContext: g}
	if l := rc.locals[key]; l != nil {
		pc.State = cloneMap(l.state)
		pc.Metadata = cloneMap(l.metadata)
	} else {
		pc.State = map[string]any{}
		pc.Metadata = map[string]any{}
	}
	return pc
}

// view fills pc with the context of the plugin whose lower-case name is
// key, sharing rc's maps instead of copying them (a plugin without a local
// context gets nil State and Metadata), and returns pc. It is for plugins
// that cannot block, called on the run's goroutine: they return before rc
// changes, and must not modify the maps or keep them (plugin.Plugin in
// pkg/builtin says so).
func (rc *RequestContext) view(key string, pc *cpex.PluginContext) *cpex.PluginContext {
	*pc = cpex.PluginContext{GlobalContext: rc.Global}
	if l := rc.locals[key]; l != nil {
		pc.State, pc.Metadata = l.state, l.metadata
	}
	return pc
}

// Clone returns a copy of rc that later hooks can change without
// changing rc: the global state and metadata and every plugin's local
// context are copied (one level deep).
func (rc *RequestContext) Clone() *RequestContext {
	c := &RequestContext{Global: rc.Global, Secrets: rc.Secrets}
	c.Global.State = cloneMap(rc.Global.State)
	c.Global.Metadata = cloneMap(rc.Global.Metadata)
	if rc.locals != nil {
		c.locals = make(map[string]*localContext, len(rc.locals))
		for k, l := range rc.locals {
			c.locals[k] = &localContext{state: cloneMap(l.state), metadata: cloneMap(l.metadata)}
		}
	}
	return c
}

// carry keeps what a plugin returned in its reply's context.
func (rc *RequestContext) carry(plugin string, mode config.Mode, reply *cpex.PluginContext) {
	if reply == nil {
		return
	}
	if rc.locals == nil {
		rc.locals = map[string]*localContext{}
	}
	rc.locals[strings.ToLower(plugin)] = &localContext{state: cloneMap(reply.State), metadata: cloneMap(reply.Metadata)}
	switch mode {
	case config.ModeSequential, config.ModeTransform, config.ModeConcurrent:
		if rc.Global.State == nil {
			rc.Global.State = map[string]any{}
		}
		maps.Copy(rc.Global.State, reply.GlobalContext.State)
	}
}

// cloneMap copies m, never returning nil.
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return maps.Clone(m)
}
