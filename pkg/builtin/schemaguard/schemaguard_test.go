package schemaguard

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// readme is the configuration of ContextForge's schema_guard README.
var readme = map[string]any{
	"arg_schemas": map[string]any{"calc": map[string]any{
		"type": "object", "required": []any{"a", "b"},
		"properties": map[string]any{"a": map[string]any{"type": "integer"}, "b": map[string]any{"type": "integer"}},
	}},
	"result_schemas": map[string]any{"calc": map[string]any{
		"type": "object", "required": []any{"result"},
		"properties": map[string]any{"result": map[string]any{"type": "number"}},
	}},
	"block_on_violation": true,
}

func TestSchemaGuard(t *testing.T) {
	report := map[string]any{"arg_schemas": readme["arg_schemas"], "block_on_violation": false}
	tests := []struct {
		name    string
		cfg     map[string]any
		hook    cpex.HookType
		payload string
		want    string // "" continue; "block:<code>:<first error>"; "meta:<first error>"
	}{
		{"valid arguments", readme, cpex.ToolPreInvoke, `{"name":"calc","args":{"a":1,"b":2}}`, ""},
		{"missing b", readme, cpex.ToolPreInvoke, `{"name":"calc","args":{"a":1}}`, "block:SCHEMA_GUARD_ARGS:/: missing property 'b'"},
		{"a not an integer", readme, cpex.ToolPreInvoke, `{"name":"calc","args":{"a":"1","b":2}}`, "block:SCHEMA_GUARD_ARGS:/a: got string, want integer"},
		{"absent arguments are {}", readme, cpex.ToolPreInvoke, `{"name":"calc"}`, "block:SCHEMA_GUARD_ARGS:/: missing properties 'a', 'b'"},
		{"a tool without a schema", readme, cpex.ToolPreInvoke, `{"name":"other","args":{"x":1}}`, ""},
		{"valid structured result", readme, cpex.ToolPostInvoke,
			`{"name":"calc","result":{"content":[{"type":"text","text":"3"}],"structuredContent":{"result":3}}}`, ""},
		{"result of the wrong type", readme, cpex.ToolPostInvoke,
			`{"name":"calc","result":{"content":[],"structuredContent":{"result":"three"}}}`, "block:SCHEMA_GUARD_RESULT:/result: got string, want number"},
		{"result without structuredContent", readme, cpex.ToolPostInvoke, `{"name":"calc","result":{"result":3}}`, ""},
		{"report instead of block", report, cpex.ToolPreInvoke, `{"name":"calc","args":{"a":1}}`, "meta:/: missing property 'b'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, err := New(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			res, err := p.Invoke(context.Background(), tt.hook, json.RawMessage(tt.payload), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			switch {
			case res == nil:
			case !res.Continue():
				got = "block:" + res.Violation.Code + ":" + res.Violation.Details["errors"].([]string)[0]
			default:
				got = "meta:" + res.Metadata["schema_errors"].([]string)[0]
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	for _, tt := range []struct {
		name, problem string
		cfg           map[string]any
	}{
		{"README", "", readme},
		{"ContextForge's config.yaml", "", map[string]any{"arg_schemas": map[string]any{}, "result_schemas": map[string]any{}, "block_on_violation": true}},
		{"not a schema", "arg_schemas.calc", map[string]any{"arg_schemas": map[string]any{"calc": map[string]any{"type": 3}}}},
		{"no external references", "arg_schemas.calc", map[string]any{"arg_schemas": map[string]any{"calc": map[string]any{"$ref": "file:///etc/schema.json"}}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := New(tt.cfg)
			if tt.problem == "" && err != nil || tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem)) {
				t.Errorf("err %v, want %q", err, tt.problem)
			}
		})
	}
}
