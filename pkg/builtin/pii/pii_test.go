package pii

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

func newPlugin(t testing.TB, cfg map[string]any) *Plugin {
	t.Helper()
	p, _, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p.(*Plugin)
}

// maskArg runs tool_pre_invoke on one argument and returns it as
// forwarded (unchanged when the plugin continues without a change).
func maskArg(t *testing.T, p *Plugin, text string) string {
	t.Helper()
	payload, _ := json.Marshal(map[string]any{"name": "t", "args": map[string]any{"q": text}})
	res, err := p.Invoke(context.Background(), cpex.ToolPreInvoke, payload, nil)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if res == nil {
		return text
	}
	if !res.Continue() {
		t.Fatalf("blocked: %+v", res.Violation)
	}
	var out struct {
		Args struct{ Q string } `json:"args"`
	}
	if err := json.Unmarshal(res.ModifiedPayload, &out); err != nil {
		t.Fatal(err)
	}
	return out.Args.Q
}

// TestDocumentedExamples: the examples of ContextForge's and cpex-plugins'
// pii_filter documentation and tests, input → output.
func TestDocumentedExamples(t *testing.T) {
	partialCfg := map[string]any{"default_mask_strategy": "partial"}
	tests := []struct {
		name string
		cfg  map[string]any
		in   string
		want string
	}{
		{"README curl example (partial)", partialCfg,
			"My SSN is 123-45-6789 and email is john@example.com", "My SSN is ***-**-6789 and email is j***n@example.com"},
		{"redact is the default", nil, "My SSN is 123-45-6789", "My SSN is [REDACTED]"},
		{"redaction_text", map[string]any{"redaction_text": "[PII_REDACTED]"}, "mail john.doe@example.com now", "mail [PII_REDACTED] now"},
		{"custom pattern (Employee ID)", map[string]any{"custom_patterns": []any{map[string]any{
			"type": "custom", "pattern": `\bEMP\d{6}\b`, "description": "Employee ID", "mask_strategy": "redact", "enabled": true}}},
			"Employee ID: EMP123456", "Employee ID: [REDACTED]"},
		{"custom pattern inherits the default strategy", map[string]any{"default_mask_strategy": "partial",
			"custom_patterns": []any{map[string]any{"pattern": `\bEMP\d{6}\b`, "description": "Employee ID"}}},
			"id EMP123456", "id E*******6"},
		{"disabled custom pattern", map[string]any{"custom_patterns": []any{map[string]any{
			"pattern": `\bEMP\d{6}\b`, "description": "Employee ID", "enabled": false}}}, "id EMP123456", "id EMP123456"},
		{"American Express card", partialCfg, "Card: 3782 822463 10005", "Card: ****-****-****-0005"},
		{"Visa card", nil, "pay 4111-1111-1111-1111 today", "pay [REDACTED] today"},
		{"not Luhn-valid", nil, "ref 4111 1111 1111 1112", "ref 4111 1111 1111 1112"},
		{"Luhn-valid, unknown issuer", nil, "ref 1234 5678 9012 3452", "ref 1234 5678 9012 3452"},
		{"plain nine digits are no SSN", map[string]any{"detect_bsn": false, "detect_bank_account": false}, "order 123456789", "order 123456789"},
		{"SSN with context", nil, "SSN: 123456789", "[REDACTED]"},
		{"impossible SSN area 000", nil, "x 000-12-3456", "x 000-12-3456"},
		{"impossible SSN area 666", nil, "x 666-12-3456", "x 666-12-3456"},
		{"impossible SSN group 00", nil, "x 123-00-4567", "x 123-00-4567"},
		{"impossible SSN serial 0000", nil, "x 123-45-0000", "x 123-45-0000"},
		{"US phone", partialCfg, "call (555) 123-4567", "call (***-***-4567"},
		{"international phone", partialCfg, "call +4915112345678", "call ***-***-5678"},
		{"IPv4", nil, "host 192.168.1.20 is up", "host [REDACTED] is up"},
		{"IPv6", nil, "at 2001:0db8:85a3:0000:0000:8a2e:0370:7334.", "at [REDACTED]."},
		{"date of birth", nil, "DOB: 01/15/1990", "[REDACTED]"},
		{"passport", nil, "Passport Number: AB123456", "[REDACTED]"},
		{"driver's license", nil, "Driver's License: D1234567", "[REDACTED]"},
		{"IBAN", partialCfg, "IBAN NL91ABNA0417164300 ok", "IBAN NL************4300 ok"},
		// The documented pattern takes 15 or 18 characters: a German IBAN
		// (22) is not one.
		{"22-character IBAN", map[string]any{"detect_bank_account": true}, "DE89370400440532013000", "DE89370400440532013000"},
		{"medical record", nil, "MRN: 12345678", "[REDACTED]"},
		{"BSN", nil, "My BSN is 123456782", "[REDACTED]"},
		{"whitelist", map[string]any{"whitelist_patterns": []any{"test@example.com", "555-555-5555"}},
			"test@example.com or real@corp.io, 555-555-5555", "test@example.com or [REDACTED], 555-555-5555"},
		{"detector off", map[string]any{"detect_email": false}, "a@b.com", "a@b.com"},
		{"remove", map[string]any{"default_mask_strategy": "remove"}, "x a@b.com y", "x  y"},
		{"AWS key, when asked for", map[string]any{"detect_aws_keys": true}, "key AKIAIOSFODNN7EXAMPLE", "key [REDACTED]"},
		{"AWS key, off by default", nil, "key AKIAIOSFODNN7EXAMPLE", "key AKIAIOSFODNN7EXAMPLE"},
		{"API key, when asked for", map[string]any{"detect_api_keys": true}, "api_key: abcdefghijklmnopqrstuvwx", "[REDACTED]"},
		{"clean text", nil, "nothing to see here", "nothing to see here"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := maskArg(t, newPlugin(t, tt.cfg), tt.in); got != tt.want {
				t.Errorf("%q → %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestHashAndTokenize(t *testing.T) {
	h := newPlugin(t, map[string]any{"default_mask_strategy": "hash"})
	a, b := maskArg(t, h, "a@b.com"), maskArg(t, h, "a@b.com")
	if !regexp.MustCompile(`^\[HASH:[0-9a-f]{16}\]$`).MatchString(a) || a != b {
		t.Errorf("hash: %q then %q, want one [HASH:<16 hex>]", a, b)
	}
	if c := maskArg(t, h, "c@d.com"); c == a {
		t.Errorf("two values hash alike: %q", c)
	}
	tok := maskArg(t, newPlugin(t, map[string]any{"default_mask_strategy": "tokenize"}), "a@b.com")
	if !regexp.MustCompile(`^\[TOKEN:[0-9a-f]{8}\]$`).MatchString(tok) {
		t.Errorf("tokenize: %q", tok)
	}
}

func TestHooks(t *testing.T) {
	p := newPlugin(t, nil)
	tests := []struct {
		hook          cpex.HookType
		payload, want string
	}{
		{cpex.ToolPostInvoke, `{"name":"t","result":{"content":[{"type":"text","text":"mail a@b.com"}]}}`,
			`{"name":"t","result":{"content":[{"type":"text","text":"mail [REDACTED]"}]}}`},
		{cpex.PromptPreFetch, `{"prompt_id":"p","args":{"who":"a@b.com"}}`, `{"prompt_id":"p","args":{"who":"[REDACTED]"}}`},
		{cpex.PromptPostFetch, `{"prompt_id":"p","result":{"description":"a@b.com","messages":[{"role":"user","content":{"type":"text","text":"to a@b.com"}}]}}`,
			`{"prompt_id":"p","result":{"description":"a@b.com","messages":[{"role":"user","content":{"type":"text","text":"to [REDACTED]"}}]}}`},
		{cpex.ResourcePostFetch, `{"uri":"x","content":{"text":"a@b.com"}}`, ""},
	}
	for _, tt := range tests {
		res, err := p.Invoke(context.Background(), tt.hook, json.RawMessage(tt.payload), nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.hook, err)
		}
		switch {
		case tt.want == "" && res != nil:
			t.Errorf("%s: got %+v, want continue", tt.hook, res)
		case tt.want != "" && (res == nil || string(res.ModifiedPayload) != tt.want):
			t.Errorf("%s: got %+v, want %s", tt.hook, res, tt.want)
		}
	}
}

func TestBlockOnDetection(t *testing.T) {
	p := newPlugin(t, map[string]any{"block_on_detection": true})
	res, err := p.Invoke(context.Background(), cpex.ToolPreInvoke,
		json.RawMessage(`{"name":"t","args":{"a":"123-45-6789","b":["x@y.com","z@w.org"]}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res == nil || res.Continue() || res.Violation == nil {
		t.Fatalf("got %+v, want a block", res)
	}
	v := res.Violation
	if v.Code != "PII_DETECTED_IN_TOOL_ARGS" || v.Reason != "PII detected in tool arguments" || v.Details["count"] != 3 ||
		strings.Join(v.Details["detected_types"].([]string), ",") != "email,ssn" {
		t.Errorf("violation %+v", v)
	}
	if res, _ := p.Invoke(context.Background(), cpex.ToolPreInvoke, json.RawMessage(`{"name":"t","args":{"a":"clean"}}`), nil); res != nil {
		t.Errorf("clean arguments: %+v", res)
	}
}

func TestLimits(t *testing.T) {
	p := newPlugin(t, map[string]any{"max_text_bytes": 8, "max_collection_items": 2, "max_nested_depth": 2})
	for _, payload := range []string{
		`{"name":"t","args":{"a":"123456789"}}`,
		`{"name":"t","args":{"a":[1,2,3]}}`,
		`{"name":"t","args":{"a":[[["x"]]]}}`,
	} {
		if _, err := p.Invoke(context.Background(), cpex.ToolPreInvoke, json.RawMessage(payload), nil); err == nil {
			t.Errorf("%s: no error", payload)
		}
	}
	if _, err := p.Invoke(context.Background(), cpex.ToolPreInvoke, json.RawMessage(`{"name":"t","args":{"a":"short"}}`), nil); err != nil {
		t.Errorf("within the limits: %v", err)
	}
	_, err := p.Invoke(context.Background(), cpex.ToolPreInvoke, json.RawMessage(`{"name":"t","args":{"a":"123456789"}}`), nil)
	if !errors.Is(err, errTooLarge) {
		t.Errorf("err %v, want errTooLarge", err)
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     map[string]any
		problem string // "" none
		warning string // "" none
	}{
		{"ContextForge's example", map[string]any{
			"detect_ssn": true, "detect_credit_card": true, "detect_email": true, "detect_phone": true, "detect_ip_address": true,
			"detect_aws_keys": true, "detect_api_keys": true, "default_mask_strategy": "partial", "redaction_text": "[PII_REDACTED]",
			"block_on_detection": false, "include_detection_details": true,
			"whitelist_patterns": []any{"test@example.com", "555-555-5555"}}, "", ""},
		{"log_detections", map[string]any{"log_detections": true}, "", "log_detections: not supported"},
		{"unknown key", map[string]any{"detect_ssns": true}, "", "detect_ssns: unknown key"},
		{"bad strategy", map[string]any{"default_mask_strategy": "scramble"}, "default_mask_strategy", ""},
		{"custom too long", map[string]any{"custom_patterns": []any{map[string]any{"pattern": strings.Repeat("a", 257)}}}, "longer than 256", ""},
		{"custom too many alternations", map[string]any{"custom_patterns": []any{map[string]any{"pattern": strings.Repeat("a|", 17) + "a"}}}, "alternations", ""},
		{"custom not RE2", map[string]any{"custom_patterns": []any{map[string]any{"pattern": `(?<=a)b`}}}, "not an RE2", ""},
		{"whitelist not RE2", map[string]any{"whitelist_patterns": []any{"(x"}}, "whitelist_patterns[0]", ""},
		{"max_text_bytes 0", map[string]any{"max_text_bytes": 0}, "max_text_bytes: must be between", ""},
		{"detect flag not a bool", map[string]any{"detect_ssn": "yes"}, "detect_ssn", ""},
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

func BenchmarkPII4KB(b *testing.B) {
	p := newPlugin(b, map[string]any{"default_mask_strategy": "partial"})
	text := strings.Repeat("The quick brown fox jumps over the lazy dog and reports to the office. ", 56) +
		"Reach me at john@example.com or 555-123-4567, SSN 123-45-6789."
	payload, _ := json.Marshal(map[string]any{"name": "t", "args": map[string]any{"q": text}})
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Invoke(context.Background(), cpex.ToolPreInvoke, payload, nil); err != nil {
			b.Fatal(err)
		}
	}
}
