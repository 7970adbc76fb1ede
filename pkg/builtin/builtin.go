// Package builtin runs ContextForge's most used plugins inside the
// sidecar's process. A plugin entry whose kind is one of their class paths
// (for example plugins.deny_filter.deny.DenyListPlugin) needs no plugin
// server: [Open] builds the plugin from the entry's config: block, and the
// [Conn] it returns plugs into the plugin client as its connection, so the
// executor runs it exactly like an external plugin (modes, priority,
// conditions, on_error, timeouts, metrics, spans), in one chain with
// external ones. [Check] is what --check-config reports about an entry.
//
// docs/builtin-plugins.md lists each plugin and each of its config keys.
package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/deny"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/lengthguard"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/pii"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/plugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/ratelimit"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/schemaguard"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/searchreplace"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/secrets"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/urlrep"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Specs returns the built-in plugins, in the order of the documentation.
func Specs() []plugin.Spec {
	return []plugin.Spec{
		deny.Spec(),
		searchreplace.Spec(),
		pii.Spec(),
		secrets.Spec(),
		ratelimit.Spec(),
		lengthguard.Spec(),
		urlrep.Spec(),
		schemaguard.Spec(),
	}
}

// Lookup returns the built-in plugin whose class path is kind.
func Lookup(kind string) (plugin.Spec, bool) {
	for _, s := range Specs() {
		if slices.Contains(s.Kinds, kind) {
			return s, true
		}
	}
	return plugin.Spec{}, false
}

// Known reports whether the sidecar runs kind in-process.
func Known(kind string) bool {
	_, ok := Lookup(kind)
	return ok
}

// Names lists the short names of the built-in plugins ("deny_filter, ...").
func Names() string {
	var names []string
	for _, s := range Specs() {
		names = append(names, s.Name)
	}
	return strings.Join(names, ", ")
}

// Check reports what is wrong with, or worth a warning in, an entry of
// built-in kind: its config: block (as the plugin reads it) and its hooks.
// Fields of the config are returned as "config.<key>", hooks as
// "hooks[i]". An unknown kind gives one problem.
func Check(kind string, hooks []cpex.HookType, cfg map[string]any) []plugin.Issue {
	spec, ok := Lookup(kind)
	if !ok {
		return []plugin.Issue{plugin.Problem("kind", fmt.Sprintf("%q is not a built-in plugin", kind))}
	}
	p, issues, err := spec.New(cfg)
	if err == nil {
		_ = p.Close()
	}
	for i := range issues {
		issues[i].Field = strings.TrimSuffix("config."+issues[i].Field, ".")
	}
	if len(hooks) == 0 {
		issues = append(issues, plugin.Warning("hooks", fmt.Sprintf("none: %s never runs (it implements %s)", spec.Name, hookList(spec.Hooks))))
	}
	for i, h := range hooks {
		if !spec.Implements(h) {
			issues = append(issues, plugin.Warning(fmt.Sprintf("hooks[%d]", i),
				fmt.Sprintf("%s does not implement %s: it lets every message through there (it implements %s)", spec.Name, h, hookList(spec.Hooks))))
		}
	}
	return issues
}

func hookList(hooks []cpex.HookType) string {
	s := make([]string, len(hooks))
	for i, h := range hooks {
		s[i] = string(h)
	}
	return strings.Join(s, ", ")
}

// Conn is a built-in plugin seen as a connection to a plugin server: it
// has the methods of the plugin client's connection (pluginclient.Conn),
// answers get_plugin_config with the plugin's name (so the local entry is
// the whole config) and invoke_hook by calling the plugin. It never loses
// its connection.
type Conn struct {
	name string
	p    plugin.Plugin
	cont *cpex.InvokeHookReply // the reply of every "continue unchanged"
}

// Open builds the plugin of an entry (its name, kind and config: block).
func Open(name, kind string, cfg map[string]any) (*Conn, error) {
	spec, ok := Lookup(kind)
	if !ok {
		return nil, fmt.Errorf("plugin %q: kind %q is not a built-in plugin", name, kind)
	}
	p, _, err := spec.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("plugin %q (%s): %w", name, spec.Name, err)
	}
	return &Conn{name: name, p: p, cont: &cpex.InvokeHookReply{PluginName: name, Result: &cpex.PluginResult{}}}, nil
}

// NonBlocking reports whether the plugin cannot block (plugin.NonBlocking):
// its invocation only computes, so the executor needs no timer for it.
func (c *Conn) NonBlocking() bool {
	nb, ok := c.p.(plugin.NonBlocking)
	return ok && nb.NonBlocking()
}

// PluginConfig answers get_plugin_config: the plugin's name only, so the
// local entry is the effective config.
func (c *Conn) PluginConfig(_ context.Context, name string) (json.RawMessage, bool, error) {
	if !strings.EqualFold(name, c.name) {
		return nil, false, nil
	}
	raw, err := json.Marshal(map[string]string{"name": c.name})
	return raw, err == nil, err
}

// InvokeHook runs the plugin. A plugin failure is an error reply, as a
// plugin server sends it; only a failure while ctx is done is an error
// (the context's). Whether ctx is done before the call is the caller's to
// check (the executor does, before every plugin): a plugin that only
// computes does not look at it. The reply of a plugin that continues
// unchanged (a nil result) is one shared value: replies are read, never
// modified.
func (c *Conn) InvokeHook(ctx context.Context, hook cpex.HookType, _ string, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	res, err := c.p.Invoke(ctx, hook, payload, pctx)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return &cpex.InvokeHookReply{PluginName: c.name, Error: &cpex.PluginErrorModel{
			Message: err.Error(), PluginName: c.name, Code: "BUILTIN_PLUGIN_ERROR",
		}}, nil
	}
	if res == nil {
		return c.cont, nil
	}
	if res.Violation != nil && res.Violation.PluginName == "" {
		res.Violation.PluginName = c.name
	}
	return &cpex.InvokeHookReply{PluginName: c.name, Result: res}, nil
}

// Health reports the plugin alive: it runs in this process.
func (c *Conn) Health(context.Context) error { return nil }

// Close releases the plugin.
func (c *Conn) Close() error { return c.p.Close() }
