package mcpmsg

import (
	"strings"
	"testing"
)

func TestParseListIndex(t *testing.T) {
	keys := ListKeys{Items: "tools", Name: "name"}
	for _, tc := range []struct {
		name, result string
		names        []string // nil: not indexed
		scope        string
	}{
		{"plain", `{"tools":[{"name":"a"},{"name":"b","x":{"name":"c"}}]}`, []string{`a`, `b`}, ""},
		{"spaces, scope, escapes, no name", `{ "cacheScope" : "public" , "t\u006fols" : [ {"n\u0061me":"\u00e9"} , {"name":1}, {} ] }`,
			[]string{`\u00e9`, "", ""}, `"public"`},
		{"empty", `{"tools":[]}`, []string{}, ""},
		{"items case", `{"Tools":[{"name":"a"}]}`, nil, ""},
		{"name case", `{"tools":[{"Name":"a"}]}`, nil, ""},
		{"item not an object", `{"tools":[{"name":"a"},1]}`, nil, ""},
		{"items not an array", `{"tools":{}}`, nil, ""},
		{"no items", `{"prompts":[]}`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `[{"jsonrpc":"2.0","method":"x"}, {"jsonrpc":"2.0","id":1,"result":` + tc.result + `}]`
			b, err := ParseList([]byte(body), keys)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := b.Messages[0].ListIndex(); ok {
				t.Error("a notification has an index")
			}
			m := &b.Messages[1]
			ix, ok := m.ListIndex()
			if ok != (tc.names != nil) {
				t.Fatalf("indexed %v, want %v", ok, tc.names != nil)
			}
			if !ok {
				return
			}
			if m.Raw[ix.Open-1] != '[' || m.Raw[ix.Close] != ']' || len(ix.Items) != len(tc.names) {
				t.Fatalf("index %+v", ix)
			}
			for k, it := range ix.Items {
				name := ""
				if it.NameStart >= 0 {
					name = string(m.Raw[it.NameStart:it.NameEnd])
				}
				if name != tc.names[k] || it.NameEscaped != strings.Contains(name, `\`) || m.Raw[it.Start] != '{' || m.Raw[it.End-1] != '}' {
					t.Errorf("item %d: %+v names %q, want %q", k, it, name, tc.names[k])
				}
			}
			scope := ""
			if ix.Scope[0] >= 0 {
				scope = string(m.Raw[ix.Scope[0]:ix.Scope[1]])
			}
			if scope != tc.scope {
				t.Errorf("scope %q, want %q", scope, tc.scope)
			}
			if p, _ := Parse([]byte(body)); p != nil {
				if _, ok := p.Messages[1].ListIndex(); ok {
					t.Error("Parse indexed a list")
				}
			}
			m.Raw = m.Raw[:len(m.Raw)-1]
			if _, ok := m.ListIndex(); ok {
				t.Error("index trusted after Raw changed")
			}
		})
	}
}
