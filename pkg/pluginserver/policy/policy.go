// Package policy is the example plugin of cmd/example-plugin: a deny-list
// and a redaction policy, served by [pluginserver].
//
// A deny rule is a regular expression (Go RE2 syntax). A tool call is blocked
// when the pattern matches the tool name or any string in its arguments; a
// prompt when it matches the prompt id or an argument; a resource read when
// it matches the URI. A redaction rule rewrites every match of its pattern
// (regexp.ReplaceAllString, so $1 expands) in the strings of tool arguments
// and prompt arguments (pre hooks) and of tool results, prompt results and
// resource contents (post hooks). Structural fields of results (type,
// mimeType, uri, blob, _meta) are left alone.
package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver"
)

// DefaultName is the plugin name used when a Config has none.
const DefaultName = "ExamplePolicy"

// DefaultPriority is the priority reported when a Config sets none.
const DefaultPriority = 50

// ViolationCode is the default code of a deny violation.
const ViolationCode = "DENY_LIST"

// Plugin is a compiled policy; it implements [pluginserver.Plugin].
type Plugin struct {
	cfg    Config
	deny   []*regexp.Regexp
	redact []compiledRedaction
	log    zerolog.Logger
}

type compiledRedaction struct {
	re   *regexp.Regexp
	repl string
}

// New compiles cfg. log receives one line per decision (nil: none).
func New(cfg Config, log *zerolog.Logger) (*Plugin, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.ViolationCode == "" {
		cfg.ViolationCode = ViolationCode
	}
	p := &Plugin{cfg: cfg, log: zerolog.Nop()}
	if log != nil {
		p.log = log.With().Str("plugin", cfg.Name).Logger()
	}
	for _, pat := range cfg.Deny {
		re, err := regexp.Compile(pat)
		if err != nil {
			return nil, fmt.Errorf("%w: plugin %s: deny pattern: %w", ErrInvalidConfig, cfg.Name, err)
		}
		p.deny = append(p.deny, re)
	}
	for _, r := range cfg.Redact {
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%w: plugin %s: redact pattern: %w", ErrInvalidConfig, cfg.Name, err)
		}
		p.redact = append(p.redact, compiledRedaction{re, r.Replacement})
	}
	for _, h := range cfg.Hooks {
		if !cpex.KnownHook(h) {
			return nil, fmt.Errorf("%w: plugin %s: unknown hook %q", ErrInvalidConfig, cfg.Name, h)
		}
	}
	return p, nil
}

// NewServer compiles cfgs into one pluginserver.Server with opts (nil:
// defaults), serving the extra plugins too (a [NewTokenCheck]). Plugins log
// through opts.Logger.
func NewServer(cfgs []Config, opts *pluginserver.Options, extra ...pluginserver.Plugin) (*pluginserver.Server, error) {
	var log *zerolog.Logger
	if opts != nil {
		log = opts.Logger
	}
	plugins := make([]pluginserver.Plugin, 0, len(cfgs))
	seen := map[string]bool{}
	for _, c := range cfgs {
		p, err := New(c, log)
		if err != nil {
			return nil, err
		}
		key := strings.ToLower(p.Name())
		if seen[key] {
			return nil, fmt.Errorf("%w: duplicate plugin name %q", ErrInvalidConfig, p.Name())
		}
		seen[key] = true
		plugins = append(plugins, p)
	}
	for _, p := range extra {
		key := strings.ToLower(p.Name())
		if seen[key] {
			return nil, fmt.Errorf("%w: duplicate plugin name %q", ErrInvalidConfig, p.Name())
		}
		seen[key] = true
		plugins = append(plugins, p)
	}
	return pluginserver.NewWithOptions(opts, plugins...), nil
}

// Name implements [pluginserver.Plugin.Name].
func (p *Plugin) Name() string { return p.cfg.Name }

// Hooks returns the hooks the plugin reports: the configured ones, or those
// its rules can act on.
func (p *Plugin) Hooks() []cpex.HookType {
	if len(p.cfg.Hooks) > 0 {
		return slices.Clone(p.cfg.Hooks)
	}
	var hooks []cpex.HookType
	for _, h := range cpex.MCPHooks {
		pre := h == cpex.ToolPreInvoke || h == cpex.PromptPreFetch || h == cpex.ResourcePreFetch
		denies := len(p.deny) > 0 && pre
		redacts := len(p.redact) > 0 && h != cpex.ResourcePreFetch
		if denies || redacts {
			hooks = append(hooks, h)
		}
	}
	return hooks
}

// Config implements [pluginserver.Plugin.Config].
func (p *Plugin) Config() map[string]any {
	prio := DefaultPriority
	if p.cfg.Priority != nil {
		prio = *p.cfg.Priority
	}
	redact := make([]any, 0, len(p.cfg.Redact))
	for _, r := range p.cfg.Redact {
		redact = append(redact, map[string]any{"pattern": r.Pattern, "replacement": r.Replacement})
	}
	deny := make([]any, 0, len(p.cfg.Deny))
	for _, d := range p.cfg.Deny {
		deny = append(deny, d)
	}
	desc := p.cfg.Description
	if desc == "" {
		desc = "Deny-list and redaction policy (mcp-extproc example plugin)"
	}
	return pluginserver.Config{
		Name:        p.cfg.Name,
		Description: desc,
		Author:      "mcp-extproc",
		Version:     "0.1.0",
		Tags:        []string{"example", "policy"},
		Hooks:       p.Hooks(),
		Mode:        p.cfg.Mode,
		Priority:    &prio,
		Config:      map[string]any{"deny": deny, "redact": redact},
	}.Map()
}

// InvokeHook implements [pluginserver.Plugin.InvokeHook]. Hooks the policy
// does not know continue unchanged; a payload that does not parse is an
// error.
func (p *Plugin) InvokeHook(_ context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
	obj, err := decodeObject(payload)
	if err != nil {
		return nil, fmt.Errorf("%s payload: %w", hook, err)
	}
	var (
		subject string // what a deny rule checks besides the args
		field   string // the payload field that deny checks and pre hooks redact
		post    bool
	)
	switch hook {
	case cpex.ToolPreInvoke:
		subject, field = "name", "args"
	case cpex.PromptPreFetch:
		subject, field = "prompt_id", "args"
	case cpex.ResourcePreFetch:
		subject = "uri"
	case cpex.ToolPostInvoke, cpex.PromptPostFetch:
		field, post = "result", true
	case cpex.ResourcePostFetch:
		field, post = "content", true
	default:
		return nil, nil
	}

	if !post {
		if v := p.check(obj, subject, field); v != nil {
			p.log.Info().Str("hook", string(hook)).Str("code", v.Code).Any("details", v.Details).Msg("denied")
			return pluginserver.Block(p.cfg.Name, *v), nil
		}
	}
	if field == "" || len(p.redact) == 0 {
		return nil, nil
	}
	val, ok := obj[field]
	if !ok {
		return nil, nil
	}
	newVal, n := p.redactValue(val, post)
	if n == 0 {
		return nil, nil
	}
	obj[field] = newVal
	p.log.Info().Str("hook", string(hook)).Int("redactions", n).Msg("redacted")
	reply, err := pluginserver.Modify(p.cfg.Name, obj)
	if err != nil {
		return nil, err
	}
	reply.Result.Metadata = map[string]any{"redactions": n}
	if pctx != nil {
		// Tell later hooks of the same request what happened here.
		key := p.cfg.Name + ".redactions"
		prev, _ := pctx.State[key].(float64)
		pctx.State[key] = prev + float64(n)
		reply.Context = pctx
	}
	return reply, nil
}
