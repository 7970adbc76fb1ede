package pluginserver

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Plugin is one plugin served by a [Server].
type Plugin interface {
	// Name is the plugin's name, as clients send it in invoke_hook's
	// "plugin_name" and get_plugin_config's "name".
	Name() string
	// Config is what get_plugin_config returns for this plugin: a cpex
	// PluginConfig object (name, kind, hooks, mode, priority, conditions...).
	// [Config.Map] builds one.
	Config() map[string]any
	// InvokeHook runs one hook. ctx is cancelled when the server closes the
	// session or the endpoint; implementations that block must honour it.
	// A returned error becomes an error reply ([Error] chooses its fields);
	// (nil, nil) means "continue unchanged". An empty plugin_name in the
	// reply or in its violation gets the plugin's name; otherwise the reply
	// is sent as is.
	InvokeHook(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error)
}

// DefaultPriority is cpex's default plugin priority (lower runs first).
const DefaultPriority = 100

// DefaultMode is the mode [Config.Map] reports when Mode is empty.
const DefaultMode = "sequential"

// Config is a cpex PluginConfig, the object get_plugin_config returns. Its
// zero fields take cpex's defaults in [Config.Map].
type Config struct {
	Name        string           `json:"name"`
	Description string           `json:"description,omitempty"`
	Author      string           `json:"author,omitempty"`
	Kind        string           `json:"kind,omitempty"` // default "external"
	Version     string           `json:"version,omitempty"`
	Tags        []string         `json:"tags,omitempty"`
	Hooks       []cpex.HookType  `json:"hooks,omitempty"`
	Mode        string           `json:"mode,omitempty"`     // default DefaultMode
	Priority    *int             `json:"priority,omitempty"` // default DefaultPriority
	Conditions  []map[string]any `json:"conditions,omitempty"`
	AppliedTo   map[string]any   `json:"applied_to,omitempty"`
	Config      map[string]any   `json:"config,omitempty"`
}

// Map returns c as the JSON object get_plugin_config sends, with kind, mode
// and priority defaulted and hooks, tags and conditions always present.
func (c Config) Map() map[string]any {
	if c.Kind == "" {
		c.Kind = "external"
	}
	if c.Mode == "" {
		c.Mode = DefaultMode
	}
	if c.Priority == nil {
		p := DefaultPriority
		c.Priority = &p
	}
	m := map[string]any{
		"name":     c.Name,
		"kind":     c.Kind,
		"mode":     c.Mode,
		"priority": *c.Priority,
	}
	hooks := make([]any, 0, len(c.Hooks))
	for _, h := range c.Hooks {
		hooks = append(hooks, string(h))
	}
	m["hooks"] = hooks
	tags := make([]any, 0, len(c.Tags))
	for _, t := range c.Tags {
		tags = append(tags, t)
	}
	m["tags"] = tags
	conds := make([]any, 0, len(c.Conditions))
	for _, cond := range c.Conditions {
		conds = append(conds, cond)
	}
	m["conditions"] = conds
	for k, v := range map[string]string{"description": c.Description, "author": c.Author, "version": c.Version} {
		if v != "" {
			m[k] = v
		}
	}
	if c.AppliedTo != nil {
		m["applied_to"] = c.AppliedTo
	}
	if c.Config != nil {
		m["config"] = c.Config
	}
	return m
}

// HookFunc runs one hook; it has the signature of [Plugin.InvokeHook].
type HookFunc func(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error)

// Func returns a Plugin named cfg.Name whose config is cfg.Map() and whose
// hooks run f. A nil f continues every hook unchanged.
func Func(cfg Config, f HookFunc) Plugin {
	return &funcPlugin{cfg: cfg, f: f}
}

type funcPlugin struct {
	cfg Config
	f   HookFunc
}

func (p *funcPlugin) Name() string           { return p.cfg.Name }
func (p *funcPlugin) Config() map[string]any { return p.cfg.Map() }

func (p *funcPlugin) InvokeHook(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	if p.f == nil {
		return nil, nil
	}
	return p.f(ctx, hook, payload, pctx)
}

// Error is an error that carries the PluginErrorModel a plugin wants in its
// error reply. Other errors are reported with code [CodePluginError].
type Error struct {
	Model cpex.PluginErrorModel
}

// Error implements error.
func (e *Error) Error() string {
	if e.Model.Code != "" {
		return fmt.Sprintf("%s: %s", e.Model.Code, e.Model.Message)
	}
	return e.Model.Message
}

// Error codes the server puts in error replies it builds itself.
const (
	CodePluginError     = "plugin_error"      // InvokeHook returned a plain error
	CodePluginPanic     = "plugin_panic"      // InvokeHook panicked
	CodeUnknownPlugin   = "unknown_plugin"    // no plugin has that name
	CodeUnknownHook     = "unknown_hook"      // hook_type is not a cpex hook
	CodeInvalidArgs     = "invalid_arguments" // invoke_hook arguments do not parse
	CodeContextCanceled = "cancelled"         // the hook's context ended first
)

// MCPInternalError is the JSON-RPC code cpex puts in PluginErrorModel by
// default (-32603).
const MCPInternalError = -32603

// Continue returns a reply that lets processing continue unchanged.
func Continue(plugin string) *cpex.InvokeHookReply {
	t := true
	return &cpex.InvokeHookReply{PluginName: plugin, Result: &cpex.PluginResult{ContinueProcessing: &t}}
}

// Modify returns a reply that continues with payload replaced by modified,
// which is marshalled to JSON.
func Modify(plugin string, modified any) (*cpex.InvokeHookReply, error) {
	raw, err := json.Marshal(modified)
	if err != nil {
		return nil, fmt.Errorf("marshal modified payload of %s: %w", plugin, err)
	}
	r := Continue(plugin)
	r.Result.ModifiedPayload = raw
	return r, nil
}

// Block returns a reply that stops processing with violation v.
func Block(plugin string, v cpex.PluginViolation) *cpex.InvokeHookReply {
	f := false
	if v.PluginName == "" {
		v.PluginName = plugin
	}
	return &cpex.InvokeHookReply{PluginName: plugin, Result: &cpex.PluginResult{ContinueProcessing: &f, Violation: &v}}
}
