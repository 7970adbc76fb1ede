package mcpheaders

import (
	"errors"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestEncodeDecode(t *testing.T) {
	tests := []struct {
		in, wire string
	}{
		{"", ""},
		{"acme-42", "acme-42"},
		{"a b", "a b"},
		{"~!@#$%^&*()", "~!@#$%^&*()"},
		{" lead", "=?base64?IGxlYWQ=?="},
		{"trail\t", "=?base64?dHJhaWwJ?="},
		{"café", "=?base64?Y2Fmw6k=?="},
		{"line\nbreak", "=?base64?bGluZQpicmVhaw==?="},
		{"\x7f", "=?base64?fw==?="},
		{"=?base64?abc?=", "=?base64?PT9iYXNlNjQ/YWJjPz0=?="}, // looks like the sentinel: encoded
		{"=?base64?", "=?base64?"},                            // prefix only: literal
		{"?=", "?="},
	}
	for _, tt := range tests {
		if got := EncodeValue(tt.in); got != tt.wire {
			t.Errorf("EncodeValue(%q) = %q, want %q", tt.in, got, tt.wire)
		}
		if got, err := Decode(tt.wire); err != nil || got != tt.in {
			t.Errorf("Decode(%q) = %q, %v; want %q", tt.wire, got, err, tt.in)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, v := range []string{"=?base64?!!?=", "=?base64?YQ?=", "=?base64?/w==?=", "=?base64?YQ==\n?="} {
		if got, err := Decode(v); !errors.Is(err, ErrBadEncoding) {
			t.Errorf("Decode(%q) = %q, %v; want ErrBadEncoding", v, got, err)
		}
	}
	// Not a sentinel (suffix overlapping the prefix): literal.
	if got, err := Decode("=?base64?="); err != nil || got != "=?base64?=" {
		t.Errorf("Decode overlap = %q, %v", got, err)
	}
}

// TestArgumentEncoding: the header value that mirrors a raw JSON argument
// (its canonical text, encoded); only strings, booleans and safe integers
// can be mirrored.
func TestArgumentEncoding(t *testing.T) {
	errNotPrimitive := errors.New("not a primitive")
	encode := func(raw []byte) (string, error) {
		s, k := primitive(jsontext.Value(raw))
		if k != kPrimitive {
			return "", errNotPrimitive
		}
		return EncodeValue(s), nil
	}
	tests := []struct {
		raw, want string
		err       error
	}{
		{`"acme"`, "acme", nil},
		{`"caf\u00e9"`, "=?base64?Y2Fmw6k=?=", nil},
		{`true`, "true", nil},
		{`false`, "false", nil},
		{`42`, "42", nil},
		{`-7`, "-7", nil},
		{`42.0`, "42", nil},
		{`1e3`, "1000", nil},
		{`9007199254740991`, "9007199254740991", nil},
		{`9007199254740992`, "", errNotPrimitive},
		{`1.5`, "", errNotPrimitive},
		{`null`, "", errNotPrimitive},
		{`[1]`, "", errNotPrimitive},
		{`{"a":1}`, "", errNotPrimitive},
		{``, "", errNotPrimitive},
	}
	for _, tt := range tests {
		got, err := encode([]byte(tt.raw))
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("encoding of %s = %q, %v; want %q, %v", tt.raw, got, err, tt.want, tt.err)
		}
	}
}

func TestStandardHeaders(t *testing.T) {
	tests := map[string]bool{
		"2026-07-28": true, "2026-12-01": true, "2027-01-01": true,
		"2025-11-25": false, "2025-03-26": false, "": false,
		"2026-07-28 ": false, "2026-7-28": false, "9999": false, "2026/07/28": false, "abcd-ef-gh": false,
	}
	for v, want := range tests {
		if got := StandardHeaders(v); got != want {
			t.Errorf("StandardHeaders(%q) = %v, want %v", v, got, want)
		}
	}
}

func hdr(kv ...string) []Header {
	var h []Header
	for i := 0; i < len(kv); i += 2 {
		h = append(h, Header{Name: kv[i], Value: kv[i+1]})
	}
	return h
}

func TestCheck(t *testing.T) {
	const v26, v25 = "2026-07-28", "2025-11-25"
	tests := []struct {
		name         string
		h            []Header
		method, body string
		wantHeader   string // "" when the check passes
		missing      bool
	}{
		{"agree", hdr("mcp-protocol-version", v26, "mcp-method", "tools/call", "mcp-name", "echo"), "tools/call", "echo", "", false},
		{"header names any case", hdr("MCP-Protocol-Version", v26, "MCP-METHOD", "tools/call", "Mcp-Name", "echo"), "tools/call", "echo", "", false},
		{"method differs", hdr("mcp-protocol-version", v26, "mcp-method", "tools/list", "mcp-name", "echo"), "tools/call", "echo", HeaderMethod, false},
		{"name differs", hdr("mcp-protocol-version", v26, "mcp-method", "tools/call", "mcp-name", "echo"), "tools/call", "delete_all", HeaderName, false},
		{"method missing, 2026", hdr("mcp-protocol-version", v26, "mcp-name", "echo"), "tools/call", "echo", HeaderMethod, true},
		{"name missing, 2026", hdr("mcp-protocol-version", v26, "mcp-method", "prompts/get"), "prompts/get", "greeting", HeaderName, true},
		{"name missing for unnamed method", hdr("mcp-protocol-version", v26, "mcp-method", "tools/list"), "tools/list", "", "", false},
		{"name header on unnamed method ignored", hdr("mcp-protocol-version", v26, "mcp-method", "tools/list", "mcp-name", "x"), "tools/list", "", "", false},
		{"missing, 2025: fine", hdr("mcp-protocol-version", v25), "tools/call", "echo", "", false},
		{"present and wrong, 2025: refused", hdr("mcp-protocol-version", v25, "mcp-method", "tools/list"), "tools/call", "echo", HeaderMethod, false},
		{"present and wrong, no version: refused", hdr("mcp-name", "echo"), "tools/call", "rm", HeaderName, false},
		{"base64 name", hdr("mcp-protocol-version", v26, "mcp-method", "resources/read", "mcp-name", EncodeValue("file:///café")), "resources/read", "file:///café", "", false},
		{"raw non-ASCII name (Go SDK v1.8.0 client)", hdr("mcp-protocol-version", v26, "mcp-method", "tools/call", "mcp-name", "café"), "tools/call", "café", "", false},
		{"bad base64 name", hdr("mcp-protocol-version", v26, "mcp-method", "tools/call", "mcp-name", "=?base64?!?="), "tools/call", "x", HeaderName, false},
		{"method is not decoded", hdr("mcp-protocol-version", v26, "mcp-method", EncodeValue("=?base64?x?=")), "=?base64?x?=", "", HeaderMethod, false},
		{"two method values, one wrong", hdr("mcp-protocol-version", v26, "mcp-method", "tools/call", "mcp-method", "tools/list", "mcp-name", "echo"), "tools/call", "echo", HeaderMethod, false},
		{"two equal values", hdr("mcp-protocol-version", v26, "mcp-method", "tools/call", "mcp-method", "tools/call", "mcp-name", "echo"), "tools/call", "echo", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.h, tt.method, tt.body)
			var me *MismatchError
			switch {
			case tt.wantHeader == "" && err != nil:
				t.Fatalf("Check = %v, want nil", err)
			case tt.wantHeader == "":
			case !errors.As(err, &me):
				t.Fatalf("Check = %v, want *MismatchError", err)
			case me.Header != tt.wantHeader || me.Missing != tt.missing || me.BodyValue == "" && tt.body != "":
				t.Fatalf("Check = %+v, want header %s missing %v", me, tt.wantHeader, tt.missing)
			}
		})
	}
}

func TestMirror(t *testing.T) {
	const v26 = "2026-07-28"
	base := func(kv ...string) []Header {
		return append(hdr("mcp-protocol-version", v26, "mcp-method", "tools/call", "mcp-name", "transfer"), hdr(kv...)...)
	}
	tests := []struct {
		name string
		h    []Header
		r    Rewrite
		want Plan
	}{
		{"nothing changed", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme"}`), NewArgs: []byte(`{"account":"acme"}`)},
			Plan{}},
		{"redacted, by value", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme","n":1}`), NewArgs: []byte(`{"account":"[REDACTED]","n":1}`)},
			Plan{Set: hdr("mcp-param-account", "[REDACTED]")}},
		{"redacted to non-ASCII", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme"}`), NewArgs: []byte(`{"account":"███"}`)},
			Plan{Set: hdr("mcp-param-account", EncodeValue("███"))}},
		{"base64 header matched after decoding", base("Mcp-Param-Account", EncodeValue("café")),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"café"}`), NewArgs: []byte(`{"account":"x"}`)},
			Plan{Set: hdr("mcp-param-account", "x")}},
		{"argument removed", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme"}`), NewArgs: []byte(`{}`)},
			Plan{Remove: []string{"mcp-param-account"}}},
		{"argument nulled", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme"}`), NewArgs: []byte(`{"account":null}`)},
			Plan{Remove: []string{"mcp-param-account"}}},
		{"arguments dropped", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme"}`)},
			Plan{Remove: []string{"mcp-param-account"}}},
		{"became an object", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme"}`), NewArgs: []byte(`{"account":{"id":"acme"}}`)},
			Plan{Remove: []string{"mcp-param-account"}, Uncertain: []string{"mcp-param-account"}}},
		{"matches no argument", base("Mcp-Param-Region", "eu"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme"}`), NewArgs: []byte(`{"account":"x"}`)},
			Plan{Remove: []string{"mcp-param-region"}, Uncertain: []string{"mcp-param-region"}}},
		{"two candidates diverge", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"a":"acme","b":"acme"}`), NewArgs: []byte(`{"a":"acme","b":"x"}`)},
			Plan{Remove: []string{"mcp-param-account"}, Uncertain: []string{"mcp-param-account"}}},
		{"two candidates agree", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"a":"acme","b":"acme"}`), NewArgs: []byte(`{"a":"x","b":"x"}`)},
			Plan{Set: hdr("mcp-param-account", "x")}},
		{"nested argument by value", base("Mcp-Param-Tenant", "t1"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"ctx":{"tenant":"t1"}}`), NewArgs: []byte(`{"ctx":{"tenant":"t2"}}`)},
			Plan{Set: hdr("mcp-param-tenant", "t2")}},
		{"integer compared numerically", base("Mcp-Param-Limit", "10"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"limit":10.0}`), NewArgs: []byte(`{"limit":5}`)},
			Plan{Set: hdr("mcp-param-limit", "5")}},
		{"boolean", base("Mcp-Param-Dry", "true"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"dry":true}`), NewArgs: []byte(`{"dry":false}`)},
			Plan{Set: hdr("mcp-param-dry", "false")}},
		{"string true is not boolean true", base("Mcp-Param-Dry", "true"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"dry":true,"s":"true"}`), NewArgs: []byte(`{"dry":true,"s":"no"}`)},
			Plan{Remove: []string{"mcp-param-dry"}, Uncertain: []string{"mcp-param-dry"}}},
		{"header value is not a valid sentinel", base("Mcp-Param-Account", "=?base64?!?="),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme"}`), NewArgs: []byte(`{"account":"x"}`)},
			Plan{Remove: []string{"mcp-param-account"}, Uncertain: []string{"mcp-param-account"}}},
		{"duplicate header", base("Mcp-Param-Account", "acme", "mcp-param-account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme"}`), NewArgs: []byte(`{"account":"x"}`)},
			Plan{Remove: []string{"mcp-param-account"}, Uncertain: []string{"mcp-param-account"}}},
		{"unparsable arguments", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme","account":"b"}`), NewArgs: []byte(`{"account":"x"}`)},
			Plan{Remove: []string{"mcp-param-account"}, Uncertain: []string{"mcp-param-account"}}},
		{"non-primitive new value", base("Mcp-Param-Account", "acme"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer", OrigArgs: []byte(`{"account":"acme"}`), NewArgs: []byte(`{"account":[1]}`)},
			Plan{Remove: []string{"mcp-param-account"}, Uncertain: []string{"mcp-param-account"}}},
		{"renamed tool", base(),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer_v2", OrigArgs: []byte(`{}`), NewArgs: []byte(`{}`)},
			Plan{Set: hdr("mcp-name", "transfer_v2")}},
		{"renamed tool, no name header before 2026", hdr("mcp-protocol-version", "2025-11-25"),
			Rewrite{Method: "tools/call", OrigName: "transfer", NewName: "transfer_v2"},
			Plan{}},
		{"renamed resource, encoded", hdr("mcp-protocol-version", v26, "mcp-method", "resources/read", "mcp-name", "file:///a"),
			Rewrite{Method: "resources/read", OrigName: "file:///a", NewName: "file:///é"},
			Plan{Set: hdr("mcp-name", EncodeValue("file:///é"))}},
		{"prompt arguments have no param headers", hdr("mcp-protocol-version", v26, "mcp-method", "prompts/get", "mcp-name", "p", "mcp-param-city", "Paris"),
			Rewrite{Method: "prompts/get", OrigName: "p", NewName: "p", OrigArgs: []byte(`{"city":"Paris"}`), NewArgs: []byte(`{"city":"X"}`)},
			Plan{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Mirror(tt.h, tt.r)
			if diff := cmp.Diff(tt.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Mirror (-want +got):\n%s", diff)
			}
		})
	}
}
