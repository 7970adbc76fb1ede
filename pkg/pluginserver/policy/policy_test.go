package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/pluginserver/policy"
)

func mustNew(t testing.TB, cfg policy.Config) *policy.Plugin {
	t.Helper()
	p, err := policy.New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

var testPolicy = policy.Config{
	Name: "Guard",
	Deny: []string{`(?i)rm\s+-rf`, `^drop_`},
	Redact: []policy.Redaction{
		{Pattern: `\b\d{3}-\d{2}-\d{4}\b`, Replacement: "[SSN]"},
		{Pattern: `(?i)(password=)\S+`, Replacement: "${1}***"},
	},
}

func TestInvokeHook(t *testing.T) {
	tests := []struct {
		name    string
		hook    cpex.HookType
		payload string
		// want: "" continue unchanged; otherwise the modified payload.
		wantModified string
		// wantViolation: field of the deny violation, "" for none.
		wantViolation string
		wantN         int // redactions reported in metadata
	}{
		{
			name: "tool allowed unchanged", hook: cpex.ToolPreInvoke,
			payload: `{"name":"search","args":{"q":"weather in Paris"}}`,
		},
		{
			name: "tool name denied", hook: cpex.ToolPreInvoke,
			payload:       `{"name":"drop_table","args":{}}`,
			wantViolation: "name",
		},
		{
			name: "nested argument denied", hook: cpex.ToolPreInvoke,
			payload:       `{"name":"shell","args":{"opts":{"cmds":["ls","RM  -RF /"]}}}`,
			wantViolation: "args.opts.cmds[1]",
		},
		{
			name: "deny beats redaction", hook: cpex.ToolPreInvoke,
			payload:       `{"name":"shell","args":{"cmd":"rm -rf /","ssn":"123-45-6789"}}`,
			wantViolation: "args.cmd",
		},
		{
			name: "arguments redacted, numbers and headers kept", hook: cpex.ToolPreInvoke,
			payload:      `{"name":"lookup","args":{"ssn":"123-45-6789 and 987-65-4321","n":12345678901234567890,"login":"password=hunter2 ok"},"headers":{"x-b3":"1"}}`,
			wantModified: `{"args":{"login":"password=*** ok","n":12345678901234567890,"ssn":"[SSN] and [SSN]"},"headers":{"x-b3":"1"},"name":"lookup"}`,
			wantN:        3,
		},
		{
			name: "tool result redacted, structure kept", hook: cpex.ToolPostInvoke,
			payload:      `{"name":"lookup","result":{"content":[{"type":"text","text":"ssn 123-45-6789"},{"type":"resource","resource":{"uri":"file:///123-45-6789","mimeType":"text/plain","text":"123-45-6789"}}],"structuredContent":{"ssn":"123-45-6789"},"isError":false}}`,
			wantModified: `{"name":"lookup","result":{"content":[{"text":"ssn [SSN]","type":"text"},{"resource":{"mimeType":"text/plain","text":"[SSN]","uri":"file:///123-45-6789"},"type":"resource"}],"isError":false,"structuredContent":{"ssn":"[SSN]"}}}`,
			wantN:        3,
		},
		{
			name: "tool result denied words are not checked", hook: cpex.ToolPostInvoke,
			payload: `{"name":"shell","result":{"content":[{"type":"text","text":"ran rm -rf"}]}}`,
		},
		{
			name: "prompt id denied", hook: cpex.PromptPreFetch,
			payload:       `{"prompt_id":"drop_everything","args":{}}`,
			wantViolation: "prompt_id",
		},
		{
			name: "prompt args redacted", hook: cpex.PromptPreFetch,
			payload:      `{"prompt_id":"greet","args":{"who":"password=x"}}`,
			wantModified: `{"args":{"who":"password=***"},"prompt_id":"greet"}`,
			wantN:        1,
		},
		{
			name: "prompt result redacted", hook: cpex.PromptPostFetch,
			payload:      `{"prompt_id":"greet","result":{"messages":[{"role":"user","content":{"type":"text","text":"my ssn is 123-45-6789"}}]}}`,
			wantModified: `{"prompt_id":"greet","result":{"messages":[{"content":{"text":"my ssn is [SSN]","type":"text"},"role":"user"}]}}`,
			wantN:        1,
		},
		{
			name: "resource uri denied", hook: cpex.ResourcePreFetch,
			payload:       `{"uri":"drop_db://x","metadata":{}}`,
			wantViolation: "uri",
		},
		{
			name: "resource metadata not checked", hook: cpex.ResourcePreFetch,
			payload: `{"uri":"file:///ok","metadata":{"note":"rm -rf"}}`,
		},
		{
			name: "resource contents redacted, blob untouched", hook: cpex.ResourcePostFetch,
			payload:      `{"uri":"file:///a","content":{"contents":[{"uri":"file:///a","text":"123-45-6789"},{"uri":"file:///b","blob":"123-45-6789"}]}}`,
			wantModified: `{"content":{"contents":[{"text":"[SSN]","uri":"file:///a"},{"blob":"123-45-6789","uri":"file:///b"}]},"uri":"file:///a"}`,
			wantN:        1,
		},
		{
			name: "hook the policy ignores", hook: "agent_pre_invoke",
			payload: `{"agent_id":"rm -rf"}`,
		},
		{
			name: "null payload", hook: cpex.ToolPreInvoke,
			payload: `null`,
		},
		{
			name: "missing args", hook: cpex.ToolPreInvoke,
			payload: `{"name":"search"}`,
		},
	}
	p := mustNew(t, testPolicy)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pctx := cpex.NewContext(cpex.GlobalContext{RequestID: "r1"})
			reply, err := p.InvokeHook(context.Background(), tt.hook, json.RawMessage(tt.payload), pctx)
			if err != nil {
				t.Fatalf("InvokeHook: %v", err)
			}
			switch {
			case tt.wantViolation != "":
				if reply == nil || reply.Result == nil || reply.Result.Continue() || reply.Result.Violation == nil {
					t.Fatalf("reply = %+v, want a violation", reply)
				}
				v := reply.Result.Violation
				if v.Code != policy.ViolationCode || v.Reason == "" || v.Description == "" || v.PluginName != "Guard" || v.Details["field"] != tt.wantViolation {
					t.Errorf("violation = %+v, want field %q", v, tt.wantViolation)
				}
				if reply.Result.Modified() {
					t.Errorf("a blocking reply also modifies: %s", reply.Result.ModifiedPayload)
				}
			case tt.wantModified != "":
				if reply == nil || reply.Result == nil || !reply.Result.Continue() || !reply.Result.Modified() {
					t.Fatalf("reply = %+v, want a modification", reply)
				}
				if got := string(reply.Result.ModifiedPayload); got != tt.wantModified {
					t.Errorf("modified payload\n got %s\nwant %s", got, tt.wantModified)
				}
				if n := reply.Result.Metadata["redactions"]; n != tt.wantN {
					t.Errorf("metadata redactions = %v, want %d", n, tt.wantN)
				}
				if reply.Context == nil || reply.Context.State["Guard.redactions"] != float64(tt.wantN) {
					t.Errorf("context = %+v, want state Guard.redactions = %d", reply.Context, tt.wantN)
				}
			default:
				if reply != nil {
					t.Errorf("reply = %+v, want continue unchanged (nil)", reply)
				}
			}
		})
	}
}

func TestInvokeHookRejectsMalformedPayload(t *testing.T) {
	p := mustNew(t, testPolicy)
	for _, payload := range []string{`[1,2]`, `{"name":`, `"text"`} {
		if _, err := p.InvokeHook(context.Background(), cpex.ToolPreInvoke, json.RawMessage(payload), nil); err == nil {
			t.Errorf("payload %s: no error", payload)
		}
	}
}

func TestRedactionCountsAccumulateInContext(t *testing.T) {
	p := mustNew(t, testPolicy)
	pctx := cpex.NewContext(cpex.GlobalContext{RequestID: "r1"})
	pctx.State["Guard.redactions"] = 2.0 // from an earlier hook of the request
	reply, err := p.InvokeHook(context.Background(), cpex.ToolPostInvoke,
		json.RawMessage(`{"name":"x","result":{"content":[{"type":"text","text":"123-45-6789"}]}}`), pctx)
	if err != nil || reply == nil || reply.Context == nil {
		t.Fatalf("reply %+v, err %v", reply, err)
	}
	if got := reply.Context.State["Guard.redactions"]; got != 3.0 {
		t.Errorf("state = %v, want 3", got)
	}
}

func TestHooksAndConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  policy.Config
		want []any
	}{
		{"deny only", policy.Config{Deny: []string{"x"}}, []any{"tool_pre_invoke", "prompt_pre_fetch", "resource_pre_fetch"}},
		{"redact only", policy.Config{Redact: []policy.Redaction{{Pattern: "x"}}},
			[]any{"tool_pre_invoke", "tool_post_invoke", "prompt_pre_fetch", "prompt_post_fetch", "resource_post_fetch"}},
		{"both", testPolicy, []any{"tool_pre_invoke", "tool_post_invoke", "prompt_pre_fetch", "prompt_post_fetch", "resource_pre_fetch", "resource_post_fetch"}},
		{"explicit", policy.Config{Deny: []string{"x"}, Hooks: []cpex.HookType{cpex.ToolPreInvoke}}, []any{"tool_pre_invoke"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustNew(t, tt.cfg).Config()
			if diff := cmp.Diff(tt.want, cfg["hooks"]); diff != "" {
				t.Errorf("hooks (-want +got):\n%s", diff)
			}
		})
	}
	prio := 5
	cfg := mustNew(t, policy.Config{Deny: []string{"a"}, Mode: "transform", Priority: &prio}).Config()
	for k, want := range map[string]any{"name": policy.DefaultName, "kind": "external", "mode": "transform", "priority": 5} {
		if cfg[k] != want {
			t.Errorf("config[%s] = %v, want %v", k, cfg[k], want)
		}
	}
	if def := mustNew(t, policy.Config{}).Config(); def["mode"] != "sequential" || def["priority"] != policy.DefaultPriority {
		t.Errorf("default config = %v", def)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]policy.Config{
		"bad deny regex":   {Deny: []string{"("}},
		"bad redact regex": {Redact: []policy.Redaction{{Pattern: "[a-"}}},
		"unknown hook":     {Hooks: []cpex.HookType{"tool_sideways"}},
	} {
		if _, err := policy.New(cfg, nil); !errors.Is(err, policy.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := policy.NewServer([]policy.Config{{Name: "A"}, {Name: "a"}}, nil); !errors.Is(err, policy.ErrInvalidConfig) {
		t.Errorf("duplicate names: err = %v", err)
	}
}

func TestParseRedaction(t *testing.T) {
	tests := []struct {
		in      string
		want    policy.Redaction
		wantErr bool
	}{
		{in: `secret=[HIDDEN]`, want: policy.Redaction{Pattern: "secret", Replacement: "[HIDDEN]"}},
		{in: `token=`, want: policy.Redaction{Pattern: "token"}},
		{in: `a=b=c`, want: policy.Redaction{Pattern: "a", Replacement: "b=c"}},
		{in: `key\=\S+=key=***`, want: policy.Redaction{Pattern: `key\=\S+`, Replacement: "key=***"}},
		{in: `\d{4}=####`, want: policy.Redaction{Pattern: `\d{4}`, Replacement: "####"}},
		{ // manifests/example-plugin/deployment.yaml
			in:   `[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}=[REDACTED]`,
			want: policy.Redaction{Pattern: `[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}`, Replacement: "[REDACTED]"},
		},
		{in: `nothing`, wantErr: true},
		{in: `=x`, wantErr: true},
		{in: `a\=b`, wantErr: true},
		{in: ``, wantErr: true},
	}
	for _, tt := range tests {
		got, err := policy.ParseRedaction(tt.in)
		if tt.wantErr {
			if !errors.Is(err, policy.ErrInvalidConfig) {
				t.Errorf("ParseRedaction(%q) = %+v, %v; want ErrInvalidConfig", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseRedaction(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	// The escaped "=" works as a regexp.
	p := mustNew(t, policy.Config{Redact: []policy.Redaction{{Pattern: `key\=\S+`, Replacement: "key=***"}}})
	reply, err := p.InvokeHook(context.Background(), cpex.ToolPreInvoke, json.RawMessage(`{"name":"t","args":{"a":"key=abc"}}`), nil)
	if err != nil || reply == nil || string(reply.Result.ModifiedPayload) != `{"args":{"a":"key=***"},"name":"t"}` {
		t.Errorf("escaped pattern: reply %+v, err %v", reply, err)
	}
}

func TestParseFile(t *testing.T) {
	yamlDoc := `
plugins:
  - name: DenyList
    deny: ["(?i)rm -rf", "^drop_"]
    priority: 10
  - name: Redactor
    mode: transform
    redact:
      - {pattern: '\d{3}-\d{2}-\d{4}', replacement: "[SSN]"}
`
	ten := 10
	want := []policy.Config{
		{Name: "DenyList", Deny: []string{"(?i)rm -rf", "^drop_"}, Priority: &ten},
		{Name: "Redactor", Mode: "transform", Redact: []policy.Redaction{{Pattern: `\d{3}-\d{2}-\d{4}`, Replacement: "[SSN]"}}},
	}
	got, err := policy.ParseFile([]byte(yamlDoc))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("YAML (-want +got):\n%s", diff)
	}
	jsonDoc, err := json.Marshal(policy.File{Plugins: want})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, jsonDoc, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err = policy.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("JSON (-want +got):\n%s", diff)
	}
	for name, doc := range map[string]string{
		"unknown field": "plugins:\n  - name: x\n    denny: [a]\n",
		"no plugins":    "plugins: []\n",
		"not a list":    "plugins: 3\n",
	} {
		if _, err := policy.ParseFile([]byte(doc)); !errors.Is(err, policy.ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

func FuzzParseRedaction(f *testing.F) {
	f.Add(`secret=[HIDDEN]`)
	f.Fuzz(func(t *testing.T, s string) {
		r, err := policy.ParseRedaction(s)
		if err != nil {
			return
		}
		if r.Pattern == "" {
			t.Fatalf("empty pattern from %q", s)
		}
		if r.Pattern+"="+r.Replacement != s {
			t.Fatalf("ParseRedaction(%q) = %+v does not rebuild the input", s, r)
		}
	})
}

func FuzzInvokeHook(f *testing.F) {
	f.Add("tool_pre_invoke", `{"name":"x","args":{"a":"123-45-6789"}}`)
	p := mustNew(f, testPolicy)
	f.Fuzz(func(t *testing.T, hook, payload string) {
		reply, err := p.InvokeHook(context.Background(), cpex.HookType(hook), json.RawMessage(payload), cpex.NewContext(cpex.GlobalContext{}))
		if err != nil || reply == nil || reply.Result == nil {
			return
		}
		if reply.Result.Modified() && !json.Valid(reply.Result.ModifiedPayload) {
			t.Fatalf("invalid modified payload %q", reply.Result.ModifiedPayload)
		}
		if reply.Result.Continue() == (reply.Result.Violation != nil) {
			t.Fatalf("continue=%v with violation %+v", reply.Result.Continue(), reply.Result.Violation)
		}
	})
}
