package hookfamily

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/config"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestRoutes: every MCP method that triggers hooks, with the hooks that
// apply to it, where its target and arguments sit, and the condition field
// its target (and an Mcp-Name header) matches.
func TestRoutes(t *testing.T) {
	tests := []struct {
		method                string
		pre, post             cpex.HookType
		targetParam, argsParm string
		conditionField        string
	}{
		{"tools/call", cpex.ToolPreInvoke, cpex.ToolPostInvoke, "name", "arguments", "tools"},
		{"prompts/get", cpex.PromptPreFetch, cpex.PromptPostFetch, "name", "arguments", "prompts"},
		{"resources/read", cpex.ResourcePreFetch, cpex.ResourcePostFetch, "uri", "", "resources"},
		{"tasks/result", "", cpex.ToolPostInvoke, "", "", "tools"},
		{"tasks/get", "", cpex.ToolPostInvoke, "", "", "tools"},
	}
	hooked := 0
	for i := range routes {
		if routes[i].Hooked() {
			hooked++
		}
	}
	if len(tests) != hooked {
		t.Errorf("%d hooked routes tested, the table has %d: test the new row", len(tests), hooked)
	}
	for _, tt := range tests {
		r, ok := ByMethod(tt.method)
		if !ok {
			t.Errorf("ByMethod(%q): not found", tt.method)
			continue
		}
		if pre, post := hooksOf(r); r.Method != tt.method || pre != tt.pre || post != tt.post {
			t.Errorf("%s: method %q hooks %q/%q, want %q/%q", tt.method, r.Method, pre, post, tt.pre, tt.post)
		}
		if r.TargetParam != tt.targetParam || r.ArgsParam != tt.argsParm {
			t.Errorf("%s: target %q args %q, want %q %q", tt.method, r.TargetParam, r.ArgsParam, tt.targetParam, tt.argsParm)
		}
		if r.Family.ConditionField != tt.conditionField {
			t.Errorf("%s: condition field %q, want %q", tt.method, r.Family.ConditionField, tt.conditionField)
		}
	}
	for _, m := range []string{"", "tools/list", "Tools/call", "initialize", "notifications/cancelled"} {
		if r, ok := ByMethod(m); ok {
			t.Errorf("ByMethod(%q) = %+v, want none", m, r)
		}
	}
}

// TestOperations: what each MCP method needs of the per-message hooks:
// the permission http_auth_check_permission is asked (ContextForge's
// names), whether token_delegate runs, whether its answer may create a
// task. Every row of the table is here.
func TestOperations(t *testing.T) {
	tests := []struct {
		method, permission, resourceType string
		delegated, createsTasks          bool
	}{
		{"tools/call", "tools.execute", "tool", true, true},
		{"prompts/get", "prompts.read", "prompt", false, false},
		{"resources/read", "resources.read", "resource", false, false},
		{"tasks/result", "", "", false, false},
		{"tasks/get", "", "", false, false},
		{"tools/list", "tools.read", "tool", false, false},
		{"prompts/list", "prompts.read", "prompt", false, false},
		{"resources/list", "resources.read", "resource", false, false},
		{"resources/templates/list", "resources.read", "resource", false, false},
		{"resources/subscribe", "resources.read", "resource", false, false},
		{"resources/unsubscribe", "resources.read", "resource", false, false},
	}
	if len(tests) != len(routes) {
		t.Errorf("%d operations tested, the table has %d: test the new row", len(tests), len(routes))
	}
	for _, tt := range tests {
		r, ok := Operation(tt.method)
		if !ok {
			t.Errorf("Operation(%q): not found", tt.method)
			continue
		}
		if r.Permission != tt.permission || r.ResourceType != tt.resourceType || r.Delegated != tt.delegated || r.CreatesTasks != tt.createsTasks {
			t.Errorf("%s: permission %q/%q delegated %v tasks %v, want %q/%q %v %v", tt.method,
				r.Permission, r.ResourceType, r.Delegated, r.CreatesTasks, tt.permission, tt.resourceType, tt.delegated, tt.createsTasks)
		}
		if _, hooked := ByMethod(tt.method); hooked != r.Hooked() {
			t.Errorf("%s: ByMethod found %v, Hooked %v", tt.method, hooked, r.Hooked())
		}
	}
	for _, m := range []string{"", "initialize", "ping", "completion/complete", "notifications/cancelled"} {
		if r, ok := Operation(m); ok {
			t.Errorf("Operation(%q) = %+v, want none", m, r)
		}
	}
}

// hooksOf returns the hooks that run on a route's request and answer ("" for none).
func hooksOf(r *Route) (pre, post cpex.HookType) {
	if r.Pre {
		pre = r.Family.Pre
	}
	if r.Post {
		post = r.Family.Post
	}
	return pre, post
}

// TestFamilies: every dispatched hook belongs to exactly one family, as its
// pre or its post hook; hooks of other families have none.
func TestFamilies(t *testing.T) {
	var hooks []cpex.HookType
	for f := range Families() {
		hooks = append(hooks, f.Pre, f.Post)
		for _, h := range []cpex.HookType{f.Pre, f.Post} {
			got, ok := ByHook(h)
			if !ok || got != f {
				t.Errorf("ByHook(%q) = %v, want family %s", h, got, f.Name)
			}
		}
	}
	if !slices.Equal(hooks, cpex.MCPHooks[:]) {
		t.Errorf("family hooks %v, want cpex.MCPHooks %v", hooks, cpex.MCPHooks)
	}
	for _, h := range []cpex.HookType{"http_pre_request", "agent_pre_invoke", ""} {
		if f, ok := ByHook(h); ok {
			t.Errorf("ByHook(%q) = %s, want none", h, f.Name)
		}
	}
}

// TestConditions: each family reads its own condition list only.
func TestConditions(t *testing.T) {
	c := &config.Condition{Tools: []string{"t"}, Prompts: []string{"p"}, Resources: []string{"r"}}
	want := map[string]string{"tools": "t", "prompts": "p", "resources": "r"}
	for f := range Families() {
		if got := f.Conditions(c); len(got) != 1 || got[0] != want[f.ConditionField] {
			t.Errorf("%s: Conditions = %v, want [%s]", f.Name, got, want[f.ConditionField])
		}
	}
	var none *Family
	if got := none.Conditions(c); got != nil {
		t.Errorf("nil family: Conditions = %v, want nil", got)
	}
	if tg := TargetOf("http_pre_request", "x"); tg.Family != nil || tg.Name != "x" {
		t.Errorf("TargetOf(unknown hook) = %+v", tg)
	}
}

// TestPayloads: the pre and post payloads of every family, built around raw
// JSON, and a modified payload mapped back onto params and result.
func TestPayloads(t *testing.T) {
	tests := []struct {
		method      string
		args, hdrs  string
		pre, post   string
		modifiedPre string
		wantParams  map[string]string
		wantHeaders map[string]string
		modPost     string
		wantResult  string
	}{{
		method: "tools/call", args: `{"a":1}`, hdrs: `{"x-h":"v"}`,
		pre:         `{"name":"n\"q","args":{"a":1},"headers":{"x-h":"v"}}`,
		post:        `{"name":"n\"q","result":{"content":[]}}`,
		modifiedPre: `{"name":"<m>","args":{"b":2},"headers":{"X-Guard":"ok"}}`,
		wantParams:  map[string]string{"name": `"\u003cm\u003e"`, "arguments": `{"b":2}`},
		wantHeaders: map[string]string{"X-Guard": "ok"},
		modPost:     `{"name":"n","result":{"content":[1]}}`, wantResult: `{"content":[1]}`,
	}, {
		method: "prompts/get", hdrs: `{"x-h":"v"}`,
		pre:         `{"prompt_id":"n\"q","args":{}}`,
		post:        `{"prompt_id":"n\"q","result":{"content":[]}}`,
		modifiedPre: `{"prompt_id":"p2","args":null}`,
		wantParams:  map[string]string{"name": `"p2"`, "arguments": `null`},
		modPost:     `{"prompt_id":"n","result":{"messages":[]}}`, wantResult: `{"messages":[]}`,
	}, {
		method: "resources/read", args: `{"ignored":true}`,
		pre:         `{"uri":"n\"q","metadata":{"ignored":true}}`,
		post:        `{"uri":"n\"q","content":{"content":[]}}`,
		modifiedPre: `{"uri":"demo://b","metadata":{"m":1}}`,
		wantParams:  map[string]string{"uri": `"demo://b"`},
		modPost:     `{"uri":"n","content":{"contents":[]}}`, wantResult: `{"contents":[]}`,
	}}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			r, _ := ByMethod(tt.method)
			f := r.Family
			pre, err := f.PrePayload(`n"q`, []byte(tt.args), []byte(tt.hdrs))
			if err != nil || string(pre) != tt.pre {
				t.Errorf("PrePayload = %s, %v; want %s", pre, err, tt.pre)
			}
			if !json.Valid(pre) {
				t.Errorf("PrePayload is not valid JSON: %s", pre)
			}
			post, err := f.PostPayload(`n"q`, []byte(`{"content":[]}`))
			if err != nil || string(post) != tt.post {
				t.Errorf("PostPayload = %s, %v; want %s", post, err, tt.post)
			}
			edit, err := r.EditOf(json.RawMessage(tt.modifiedPre))
			if err != nil {
				t.Fatalf("EditOf: %v", err)
			}
			got := map[string]string{}
			for k, v := range edit.Params {
				got[k] = string(v)
			}
			if !mapsEqual(got, tt.wantParams) || !mapsEqual(edit.Headers, tt.wantHeaders) {
				t.Errorf("EditOf = %v headers %v, want %v headers %v", got, edit.Headers, tt.wantParams, tt.wantHeaders)
			}
			res, err := f.ResultOf(json.RawMessage(tt.modPost))
			if err != nil || string(res) != tt.wantResult {
				t.Errorf("ResultOf = %s, %v; want %s", res, err, tt.wantResult)
			}
			bad := strings.Replace(tt.modPost, tt.wantResult, `"text"`, 1)
			if _, err := f.ResultOf(json.RawMessage(bad)); err == nil {
				t.Errorf("ResultOf(%s): want an error for a result that is not an object", bad)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestModifiedPayloadFieldNames: a plugin's modified payload is read with
// the field names the sidecar sends, which are those of ContextForge 1.0.8
// (ToolPreInvokePayload.args, PromptPrehookPayload and
// PromptPosthookPayload.prompt_id), and with the prompt payloads' older
// "name"; prompt_id wins when both are present.
func TestModifiedPayloadFieldNames(t *testing.T) {
	tests := []struct {
		name, method, payload string
		wantParams            map[string]string // nil: an error
	}{
		{"tool args (1.0.8)", "tools/call", `{"name":"t","args":{"q":"x"}}`,
			map[string]string{"name": `"t"`, "arguments": `{"q":"x"}`}},
		{"tool without args keeps arguments", "tools/call", `{"name":"t"}`,
			map[string]string{"name": `"t"`}},
		{"prompt prompt_id (1.0.8)", "prompts/get", `{"prompt_id":"p","args":{"a":"b"}}`,
			map[string]string{"name": `"p"`, "arguments": `{"a":"b"}`}},
		{"prompt legacy name", "prompts/get", `{"name":"old","args":{"a":"b"}}`,
			map[string]string{"name": `"old"`, "arguments": `{"a":"b"}`}},
		{"prompt_id wins over name", "prompts/get", `{"prompt_id":"new","name":"old"}`,
			map[string]string{"name": `"new"`}},
		{"null prompt_id is not replaced by name", "prompts/get", `{"prompt_id":null,"name":"old"}`,
			map[string]string{"name": `""`}},
		{"legacy name of the wrong type", "prompts/get", `{"name":7}`, nil},
		{"tool ignores prompt_id", "tools/call", `{"prompt_id":"p","name":"t"}`,
			map[string]string{"name": `"t"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := ByMethod(tt.method)
			edit, err := r.EditOf(json.RawMessage(tt.payload))
			if tt.wantParams == nil {
				if err == nil {
					t.Fatalf("EditOf(%s): want an error", tt.payload)
				}
				return
			}
			if err != nil {
				t.Fatalf("EditOf(%s): %v", tt.payload, err)
			}
			got := map[string]string{}
			for k, v := range edit.Params {
				got[k] = string(v)
			}
			if !mapsEqual(got, tt.wantParams) {
				t.Errorf("EditOf(%s) = %v, want %v", tt.payload, got, tt.wantParams)
			}
		})
	}
	// A post payload is read for its result only: prompt_id, an older
	// name, or no target at all give the same result.
	r, _ := ByMethod("prompts/get")
	for _, p := range []string{`{"prompt_id":"p","result":{"messages":[1]}}`, `{"name":"p","result":{"messages":[1]}}`, `{"result":{"messages":[1]}}`} {
		if res, err := r.Family.ResultOf(json.RawMessage(p)); err != nil || string(res) != `{"messages":[1]}` {
			t.Errorf("ResultOf(%s) = %s, %v", p, res, err)
		}
	}
}
