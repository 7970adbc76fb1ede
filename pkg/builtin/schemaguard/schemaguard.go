// Package schemaguard is the built-in schema guard: ContextForge's
// plugins.schema_guard.schema_guard.SchemaGuardPlugin. A tool's arguments
// and result are validated against the JSON Schema configured for the
// tool; a mismatch blocks the call (or is reported in the result's
// metadata). ContextForge validates a subset (type, properties, required,
// items); the schemas here are full JSON Schema (draft 2020-12 unless
// $schema says otherwise), of which that subset means the same.
package schemaguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/jsonscan"
	"github.com/mcp-extproc/mcp-extproc/pkg/builtin/plugin"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// Spec describes the plugin.
func Spec() plugin.Spec {
	return plugin.Spec{
		Name:  "schema_guard",
		Kinds: []string{"plugins.schema_guard.schema_guard.SchemaGuardPlugin"},
		Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke},
		Keys:  keys,
		New:   New,
	}
}

var keys = []plugin.Key{
	{Name: "arg_schemas", Supported: true, Note: "tool name → JSON Schema of its arguments"},
	{Name: "result_schemas", Supported: true, Note: "tool name → JSON Schema of its result (its structuredContent when it has one)"},
	{Name: "block_on_violation", Supported: true, Note: "block (default true), else report schema_errors in the result's metadata"},
}

type config struct {
	ArgSchemas       map[string]json.RawMessage `json:"arg_schemas"`
	ResultSchemas    map[string]json.RawMessage `json:"result_schemas"`
	BlockOnViolation *bool                      `json:"block_on_violation"`
}

// Plugin is a configured schema guard.
type Plugin struct {
	args, results map[string]*jsonschema.Schema
	block         bool
	decs          jsonscan.Decoders
}

// noLoader refuses every $ref outside the schema itself: a config never
// makes the sidecar read files or fetch URLs.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s: only references inside the schema are allowed", u)
}

// New builds the guard from its config: block; every schema is compiled
// here.
func New(cfg map[string]any) (plugin.Plugin, []plugin.Issue, error) {
	var c config
	issues := plugin.Decode(cfg, &c, keys)
	p := &Plugin{block: true}
	if c.BlockOnViolation != nil {
		p.block = *c.BlockOnViolation
	}
	compile := func(key string, in map[string]json.RawMessage) map[string]*jsonschema.Schema {
		out := map[string]*jsonschema.Schema{}
		tools := make([]string, 0, len(in))
		for t := range in {
			tools = append(tools, t)
		}
		sort.Strings(tools)
		for _, tool := range tools {
			s, err := compileSchema(key, tool, in[tool])
			if err != nil {
				issues = append(issues, plugin.Problem(key+"."+tool, err.Error()))
				continue
			}
			out[tool] = s
		}
		return out
	}
	p.args, p.results = compile("arg_schemas", c.ArgSchemas), compile("result_schemas", c.ResultSchemas)
	if err := plugin.Err(issues); err != nil {
		return nil, issues, err
	}
	return p, issues, nil
}

func compileSchema(key, tool string, raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	loc := "mem:///" + key + "/" + url.PathEscape(tool) + ".json"
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	return s, nil
}

// Invoke implements plugin.Plugin.
func (p *Plugin) Invoke(_ context.Context, hook cpex.HookType, payload json.RawMessage, _ *cpex.PluginContext) (*cpex.PluginResult, error) {
	schemas, code, what := p.args, "SCHEMA_GUARD_ARGS", "Arguments do not conform to schema"
	switch hook {
	case cpex.ToolPreInvoke:
	case cpex.ToolPostInvoke:
		schemas, code, what = p.results, "SCHEMA_GUARD_RESULT", "Result does not conform to schema"
	default:
		return nil, nil
	}
	name, _, err := p.decs.Member(payload, "name")
	if err != nil {
		return nil, fmt.Errorf("schema_guard: %w", err)
	}
	s := schemas[name]
	if s == nil {
		return nil, nil
	}
	var pl struct {
		Args   json.RawMessage `json:"args"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(payload, &pl); err != nil {
		return nil, fmt.Errorf("schema_guard: %w", err)
	}
	raw := pl.Args
	if hook == cpex.ToolPostInvoke {
		raw = pl.Result
		var r struct {
			Structured json.RawMessage `json:"structuredContent"`
		}
		if json.Unmarshal(raw, &r) == nil && len(r.Structured) > 0 && string(r.Structured) != "null" {
			raw = r.Structured
		}
	}
	if len(raw) == 0 || string(raw) == "null" {
		raw = json.RawMessage(`{}`) // ContextForge validates absent arguments as {}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema_guard: %w", err)
	}
	errs := messages(s.Validate(v))
	if len(errs) == 0 {
		return nil, nil
	}
	if !p.block {
		return &cpex.PluginResult{Metadata: map[string]any{"schema_errors": errs}}, nil
	}
	return plugin.Block(&cpex.PluginViolation{
		Reason: "Schema validation failed", Description: what, Code: code,
		Details: map[string]any{"errors": errs},
	}), nil
}

// messages flattens a validation error into "<instance location>: <error>"
// lines.
func messages(err error) []string {
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []string{err.Error()}
	}
	var out []string
	for _, u := range ve.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		loc := u.InstanceLocation
		if loc == "" {
			loc = "/"
		}
		out = append(out, loc+": "+u.Error.String())
	}
	if len(out) == 0 {
		out = []string{ve.Error()}
	}
	return out
}

// Close implements plugin.Plugin.
func (p *Plugin) Close() error { return nil }

// NonBlocking implements plugin.NonBlocking: Invoke only computes.
func (p *Plugin) NonBlocking() bool { return true }
