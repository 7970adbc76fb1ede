package pluginclient

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// parseRemoteConfig decodes a get_plugin_config answer as a slot does
// (found: the object is not empty, as every transport reports it).
func parseRemoteConfig(raw string) (config.Plugin, error) {
	return decodeRemoteConfig(json.RawMessage(raw), raw != "{}")
}

func TestParseRemoteConfig(t *testing.T) {
	if _, err := parseRemoteConfig(`{}`); !errors.Is(err, errNoConfig) {
		t.Errorf("empty config: err = %v, want errNoConfig", err)
	}
	if _, err := parseRemoteConfig(`{"priority":"high"}`); !errors.Is(err, ErrInvalidReply) {
		t.Errorf("bad types: err = %v, want ErrInvalidReply", err)
	}
	rp, err := parseRemoteConfig(`{"name":"P","hooks":["tool_pre_invoke"],"priority":5,"conditions":[{"tools":["a"],"server_ids":["s"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if rp.Name != "P" || *rp.Priority != 5 || len(rp.Conditions) != 1 || rp.Conditions[0].Tools[0] != "a" || rp.Conditions[0].ServerIDs[0] != "s" {
		t.Errorf("parsed %+v", rp)
	}
}

func TestParseRemoteConfigIgnoresServerTransport(t *testing.T) {
	// A Python server reports its own transport settings, in shapes we do
	// not model; they must not fail the decode.
	rp, err := parseRemoteConfig(`{"name":"p","kind":"plugins.pii.PIIFilter","mode":"enforce","mcp":{"proto":"STDIO","reconnect_delay":"soon","tls":7},` +
		`"grpc":{"target":9,"uds":[]},"unix_socket":{"path":false},"namespace":null}`)
	if err != nil {
		t.Fatal(err)
	}
	if rp.MCP != nil || rp.GRPC != nil || rp.UnixSocket != nil || rp.Mode != "enforce" {
		t.Errorf("parsed %+v", rp)
	}
}

func TestMerge(t *testing.T) {
	mcpCfg := &config.MCP{Proto: "STREAMABLEHTTP", URL: "http://p/mcp"}
	remote := config.Plugin{
		Name:        "RemoteName",
		Kind:        "plugins.pii.PIIFilter",
		Description: "remote description",
		Author:      "remote author",
		Version:     "1.0",
		Tags:        []string{"pii"},
		Hooks:       []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke},
		Mode:        "enforce",
		Priority:    ptr(10),
		Conditions:  []config.Condition{{Tools: []string{"t1"}, TenantIDs: []string{"acme"}}},
		Config:      map[string]any{"threshold": 0.5},
		MCP:         &config.MCP{Proto: "STDIO"},
	}
	tests := []struct {
		name   string
		local  config.Plugin
		remote func(*config.Plugin)
		want   config.Plugin
	}{
		{
			name:  "remote fills what local leaves unset",
			local: config.Plugin{Name: "pii", Kind: "external", MCP: mcpCfg},
			want: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Description: "remote description", Author: "remote author", Version: "1.0",
				Tags: []string{"pii"}, Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke},
				Mode: config.ModeSequential, Priority: ptr(10),
				Conditions: []config.Condition{{Tools: []string{"t1"}, TenantIDs: []string{"acme"}}},
				Config:     map[string]any{"threshold": 0.5},
			},
		},
		{
			name: "local keys override",
			local: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Hooks: []cpex.HookType{cpex.ToolPostInvoke}, Mode: config.ModeAudit, Priority: ptr(1),
				OnError: config.OnErrorIgnore, Conditions: []config.Condition{}, Tags: []string{},
				Description: "local", AppliedTo: map[string]any{"tools": []any{"x"}}, Config: map[string]any{},
			},
			want: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Description: "local", Author: "remote author", Version: "1.0",
				Tags: []string{}, Hooks: []cpex.HookType{cpex.ToolPostInvoke},
				Mode: config.ModeAudit, Priority: ptr(1), OnError: config.OnErrorIgnore,
				Conditions: []config.Condition{}, AppliedTo: map[string]any{"tools": []any{"x"}},
				Config: map[string]any{},
			},
		},
		{
			name:   "remote enforce_ignore_error implies on_error ignore",
			local:  config.Plugin{Name: "pii", Kind: "external", MCP: mcpCfg},
			remote: func(p *config.Plugin) { p.Mode = "Enforce_Ignore_Error" },
			want: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Description: "remote description", Author: "remote author", Version: "1.0",
				Tags: []string{"pii"}, Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke},
				Mode: config.ModeSequential, OnError: config.OnErrorIgnore, Priority: ptr(10),
				Conditions: []config.Condition{{Tools: []string{"t1"}, TenantIDs: []string{"acme"}}},
				Config:     map[string]any{"threshold": 0.5},
			},
		},
		{
			name:   "remote permissive with explicit on_error",
			local:  config.Plugin{Name: "pii", Kind: "external", MCP: mcpCfg},
			remote: func(p *config.Plugin) { p.Mode, p.OnError = "permissive", "FAIL" },
			want: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Description: "remote description", Author: "remote author", Version: "1.0",
				Tags: []string{"pii"}, Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.ToolPostInvoke},
				Mode: config.ModeTransform, OnError: config.OnErrorFail, Priority: ptr(10),
				Conditions: []config.Condition{{Tools: []string{"t1"}, TenantIDs: []string{"acme"}}},
				Config:     map[string]any{"threshold": 0.5},
			},
		},
		{
			name:  "remote hook aliases run as their hooks",
			local: config.Plugin{Name: "pii", Kind: "external", MCP: mcpCfg},
			remote: func(p *config.Plugin) {
				p.Hooks = []cpex.HookType{"cmf.tool_pre_invoke", "cmf.prompt_post_invoke", "prompt_pre_invoke", cpex.ToolPreInvoke, cpex.CMFLLMOutput}
			},
			want: config.Plugin{
				Name: "pii", Kind: "external", MCP: mcpCfg,
				Description: "remote description", Author: "remote author", Version: "1.0",
				Tags: []string{"pii"}, Hooks: []cpex.HookType{cpex.ToolPreInvoke, cpex.PromptPostFetch, cpex.PromptPreFetch, cpex.CMFLLMOutput},
				Mode: config.ModeSequential, Priority: ptr(10),
				Conditions: []config.Condition{{Tools: []string{"t1"}, TenantIDs: []string{"acme"}}},
				Config:     map[string]any{"threshold": 0.5},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := remote
			if tt.remote != nil {
				tt.remote(&r)
			}
			if d := cmp.Diff(tt.want, merge(tt.local, r)); d != "" {
				t.Errorf("merge (-want +got):\n%s", d)
			}
		})
	}
}
