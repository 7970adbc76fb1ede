package secrets

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

const (
	awsKey   = "AKIAIOSFODNN7EXAMPLE"
	slack    = "xoxb-123456789012-abcdefghij"
	ghToken  = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
	jwt      = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
	pemBlock = "-----BEGIN RSA PRIVATE KEY-----\nMIIE..."
)

// readme is the configuration block of cpex-plugins' secrets_detection
// README.
var readme = map[string]any{
	"enabled": map[string]any{
		"aws_access_key_id": true, "aws_secret_access_key": true, "google_api_key": true, "github_token": true,
		"stripe_secret_key": true, "slack_token": true, "private_key_block": true,
		"generic_api_key_assignment": false, "jwt_like": false, "hex_secret_32": false, "base64_24": false,
	},
	"redact": false, "redaction_text": "***REDACTED***", "block_on_detection": true, "min_findings_to_block": 1,
	"field_allowlist": []any{}, "field_denylist": []any{},
}

func with(base map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

type outcome struct {
	blocked  int    // the violation's count; 0: not blocked
	modified string // the forwarded payload when changed
}

func TestSecrets(t *testing.T) {
	redact := with(readme, "redact", true, "block_on_detection", false)
	tests := []struct {
		name    string
		cfg     map[string]any
		hook    cpex.HookType
		payload string
		want    outcome
	}{
		{"AWS key blocks", readme, cpex.ToolPreInvoke, `{"name":"t","args":{"k":"` + awsKey + `"}}`, outcome{blocked: 1}},
		{"two findings", readme, cpex.PromptPreFetch, `{"prompt_id":"p","args":{"a":"` + slack + `","b":"` + ghToken + `"}}`, outcome{blocked: 2}},
		{"private key in a tool result", readme, cpex.ToolPostInvoke,
			`{"name":"t","result":{"content":[{"type":"text","text":"` + strings.ReplaceAll(pemBlock, "\n", `\n`) + `"}]}}`, outcome{blocked: 1}},
		{"resource text", readme, cpex.ResourcePostFetch, `{"uri":"file:///x","content":[{"uri":"file:///x","text":"` + awsKey + `"}]}`, outcome{blocked: 1}},
		{"clean", readme, cpex.ToolPreInvoke, `{"name":"t","args":{"k":"nothing secret"}}`, outcome{}},
		{"broad detectors are off by default", readme, cpex.ToolPreInvoke, `{"name":"t","args":{"k":"` + jwt + `"}}`, outcome{}},
		{"jwt_like when enabled", with(readme, "enabled", map[string]any{"jwt_like": true}), cpex.ToolPreInvoke,
			`{"name":"t","args":{"k":"Bearer ` + jwt + `"}}`, outcome{blocked: 1}},
		{"below min_findings_to_block", with(readme, "min_findings_to_block", 2), cpex.ToolPreInvoke,
			`{"name":"t","args":{"k":"` + awsKey + `"}}`, outcome{}},
		{"redact", redact, cpex.ToolPreInvoke, `{"name":"t","args":{"k":"id ` + awsKey + ` and ` + slack + `"}}`,
			outcome{modified: `{"name":"t","args":{"k":"id ***REDACTED*** and ***REDACTED***"}}`}},
		{"redact keeps the assignment of a capture detector", with(redact, "redaction_text", "[X]"), cpex.ToolPreInvoke,
			`{"name":"t","args":{"k":"aws_secret_access_key = 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY'"}}`,
			outcome{modified: `{"name":"t","args":{"k":"aws_secret_access_key = '[X]'"}}`}},
		{"denylisted field", with(readme, "field_denylist", []any{"accounts.credentials.test_token"}), cpex.ToolPreInvoke,
			`{"name":"t","args":{"accounts":{"credentials":{"test_token":"` + awsKey + `"}}}}`, outcome{}},
		{"allowlisted field", with(readme, "field_allowlist", []any{"layer1"}), cpex.ToolPreInvoke,
			`{"name":"t","args":{"layer10":"` + awsKey + `","layer1":{"x":["` + awsKey + `"]}}}`, outcome{blocked: 1}},
		{"denylist wins", with(readme, "field_allowlist", []any{"layer1"}, "field_denylist", []any{"layer1.layer2"}), cpex.ToolPreInvoke,
			`{"name":"t","args":{"layer1":{"layer2":"` + awsKey + `"}}}`, outcome{}},
		{"keys are not scanned", readme, cpex.ToolPreInvoke, `{"name":"t","args":{"` + awsKey + `":1}}`, outcome{}},
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
			var got outcome
			if res != nil {
				if v := res.Violation; v != nil && !res.Continue() {
					if v.Code != "SECRETS_DETECTED" || v.Reason != "Secrets detected" || strings.Contains(string(mustJSON(v)), awsKey) {
						t.Errorf("violation %+v", v)
					}
					got.blocked = v.Details["count"].(int)
				}
				got.modified = string(res.ModifiedPayload)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name, problem, warning string
		cfg                    map[string]any
	}{
		{name: "README", cfg: readme},
		{name: "unknown detector", cfg: with(readme, "enabled", map[string]any{"aws_access_key": true}), warning: "enabled.aws_access_key: unknown detector"},
		{name: "bad path", cfg: with(readme, "field_allowlist", []any{"layer1..token"}), problem: "field_allowlist[0]"},
		{name: "min 0", cfg: with(readme, "min_findings_to_block", 0), problem: "min_findings_to_block"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, issues, err := New(tt.cfg)
			if tt.problem == "" && err != nil || tt.problem != "" && (err == nil || !strings.Contains(err.Error(), tt.problem)) {
				t.Errorf("err %v, want %q", err, tt.problem)
			}
			var warns []string
			for _, is := range issues {
				if is.Warning {
					warns = append(warns, is.Field+": "+is.Message)
				}
			}
			if tt.warning == "" && len(warns) > 0 || tt.warning != "" && (len(warns) != 1 || !strings.HasPrefix(warns[0], tt.warning)) {
				t.Errorf("warnings %q, want %q", warns, tt.warning)
			}
		})
	}
}
