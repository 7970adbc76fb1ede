package mcpheaders

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode: Decode never panics; what it accepts, EncodeValue turns back
// into a value that decodes to the same text; a value that is not
// sentinel-shaped decodes to itself; every valid UTF-8 string survives
// EncodeValue then Decode, and its encoding is visible ASCII.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"", "acme", " x", "café", "=?base64?Y2Fmw6k=?=", "=?base64?!?=", "=?base64?=", "=?base64??=",
		"=?base64?PT9iYXNlNjQ/YWJjPz0=?=", "=?base64?/w==?=", "=?base64?YQ==\n?=", "\x00", "a\tb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := Decode(v)
		if err == nil {
			if !isSentinel(v) && d != v {
				t.Fatalf("Decode(%q) = %q for a literal", v, d)
			}
			if back, err := Decode(EncodeValue(d)); utf8.ValidString(d) && (err != nil || back != d) {
				t.Fatalf("round trip of %q: %q, %v", d, back, err)
			}
		}
		if !utf8.ValidString(v) {
			return
		}
		enc := EncodeValue(v)
		for i := 0; i < len(enc); i++ {
			if enc[i] < 0x20 || enc[i] > 0x7e {
				t.Fatalf("EncodeValue(%q) = %q: not visible ASCII", v, enc)
			}
		}
		if strings.TrimSpace(enc) != enc && enc != "" {
			t.Fatalf("EncodeValue(%q) = %q: surrounding whitespace", v, enc)
		}
		if back, err := Decode(enc); err != nil || back != v {
			t.Fatalf("Decode(EncodeValue(%q)) = %q, %v", v, back, err)
		}
	})
}

// FuzzMirror: Mirror never panics, and no header it leaves or sets carries a
// value that matched an original argument the rewrite changed, unless the
// same value is still in the new arguments.
func FuzzMirror(f *testing.F) {
	f.Add("acme", `{"account":"acme"}`, `{"account":"x"}`)
	f.Add("10", `{"n":10}`, `{"n":{"a":1}}`)
	f.Add("=?base64?Y2Fmw6k=?=", `{"a":{"b":"café"}}`, `{}`)
	f.Add("true", `{"a":true,"b":"true"}`, `{"a":false,"b":"true"}`)
	f.Fuzz(func(t *testing.T, header, orig, next string) {
		h := hdr("mcp-protocol-version", "2026-07-28", "mcp-method", "tools/call", "mcp-name", "t", "Mcp-Param-X", header)
		p := Mirror(h, Rewrite{Method: "tools/call", OrigName: "t", NewName: "t", OrigArgs: []byte(orig), NewArgs: []byte(next)})
		final, present := header, true
		for _, r := range p.Remove {
			if r == "mcp-param-x" {
				present = false
			}
		}
		for _, s := range p.Set {
			if s.Name == "mcp-param-x" {
				final, present = s.Value, true
			}
		}
		if !present {
			return
		}
		decoded, err := Decode(final)
		if err != nil {
			t.Fatalf("kept an undecodable header %q", final)
		}
		o, errO := leaves([]byte(orig))
		n, errN := leaves([]byte(next))
		if errO != nil || errN != nil {
			t.Fatalf("kept header %q with unparsable arguments", final)
		}
		inNew := false
		for _, raw := range n {
			if text, k := primitive(raw); k == kPrimitive && sameValue(decoded, text, raw) {
				inNew = true
			}
		}
		if !inNew {
			for path, raw := range o {
				if text, k := primitive(raw); k == kPrimitive && sameValue(decoded, text, raw) && !sameJSON(raw, n[path]) {
					t.Fatalf("header %q mirrors changed argument %s", final, path)
				}
			}
		}
	})
}
