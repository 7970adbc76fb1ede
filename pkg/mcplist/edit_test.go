package mcplist

import (
	"strings"
	"testing"
)

func TestEditValid(t *testing.T) {
	const pre, post = `{"jsonrpc":"2.0","id":7,"result":`, "}\n"
	for _, tc := range []struct {
		name    string
		in      string
		hide    []string
		private bool
		want    string // == in when empty
		ed      Edited
	}{
		{name: "nothing", in: `{"tools":[{"name":"a"}],"cacheScope":"private"}`, hide: []string{"b"}, private: true},
		{name: "no scope asked", in: `{"tools":[{"name":"a"}],"cacheScope":"public"}`, hide: []string{"b"}},
		{name: "drop", in: `{"tools":[{"name":"a"},{"name":"b"}]}`, hide: []string{"a"},
			want: `{"tools":[{"name":"b"}]}`, ed: Edited{Dropped: 1}},
		{name: "scope", in: `{"tools":[{"name":"a"}],"ttlMs":5,"cacheScope":"public"}`, private: true,
			want: `{"tools":[{"name":"a"}],"ttlMs":5,"cacheScope":"private"}`, ed: Edited{Scoped: true}},
		{name: "scope before the items, drop", in: `{ "cacheScope" : "public" , "tools":[ {"name":"a"} , {"name":"b"} ]}`, hide: []string{"b"}, private: true,
			want: `{ "cacheScope" : "private" , "tools":[ {"name":"a"} ]}`, ed: Edited{Dropped: 1, Scoped: true}},
		{name: "scope after the items, drop all", in: `{"tools":[{"name":"a"}],"CACHESCOPE":{"x":1},"c\u0061cheScope":null}`, hide: []string{"a"}, private: true,
			want: `{"tools":[],"CACHESCOPE":"private","c\u0061cheScope":"private"}`, ed: Edited{Dropped: 1, Scoped: true}},
		{name: "nested scope kept", in: `{"tools":[{"name":"a","cacheScope":"public"}],"_meta":{"cacheScope":"public"}}`, private: true},
		{name: "escaped private rewritten", in: `{"tools":[],"cacheScope":"priv\u0061te"}`, private: true,
			want: `{"tools":[],"cacheScope":"private"}`, ed: Edited{Scoped: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := []byte(pre + tc.in + post)
			h := newHideSet(tc.hide...)
			out, ed, err := mustList(t, "tools/list").EditValid(doc, len(pre), len(doc)-len(post), Edit{Hide: h.hide, Private: tc.private})
			if err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if want == "" {
				want = tc.in
				if &out[0] != &doc[0] || len(out) != len(doc) {
					t.Error("nothing changed but the document was copied")
				}
			}
			if string(out) != pre+want+post || ed != tc.ed {
				t.Errorf("EditValid =\n%s, %+v; want\n%s, %+v", out, ed, pre+want+post, tc.ed)
			}
			if string(doc) != pre+tc.in+post {
				t.Errorf("EditValid modified its input")
			}
			// The same edit into a buffer of the caller's: a large one
			// holding old bytes is reused, a small one replaced.
			for _, buf := range [][]byte{[]byte(strings.Repeat("#", 2*len(doc))), []byte("##")} {
				out, ed, err := mustList(t, "tools/list").EditValid(doc, len(pre), len(doc)-len(post), Edit{Hide: h.hide, Private: tc.private, Buf: buf})
				if err != nil {
					t.Fatal(err)
				}
				if string(out) != pre+want+post || ed != tc.ed {
					t.Errorf("EditValid into a buffer of %d =\n%s, %+v; want\n%s, %+v", len(buf), out, ed, pre+want+post, tc.ed)
				}
				switch reused := &out[0] == &buf[:1][0]; {
				case tc.want == "" && reused, tc.want != "" && len(buf) > len(doc) && !reused:
					t.Errorf("into a buffer of %d: reused %v, want it reused when something changed and it is large enough", len(buf), reused)
				}
			}
		})
	}
}

func TestEditValidErrors(t *testing.T) {
	l := mustList(t, "tools/list")
	for _, tc := range []struct {
		name, doc  string
		start, end int
		want       string
	}{
		{"span outside", `{"tools":[]}`, 0, 20, "outside"},
		{"span reversed", `{"tools":[]}`, 5, 2, "outside"},
		{"empty", `{"tools":[]}`, 3, 3, "no JSON value"},
		{"not an object", `[{"tools":[]}]`, 0, 14, "not an object"},
		{"more after", `{"tools":[]} 1`, 0, 14, "data after the result"},
		{"item not an object", `{"tools":[1]}`, 0, 13, "tools[0] is a number"},
		{"items case", `{"Tools":[]}`, 0, 12, "only in case"},
		{"name duplicate", `{"tools":[{"name":"a","Name":"b"}]}`, 0, 35, `tools[0]: duplicate member "Name"`},
		{"cut inside", `{"tools":[{"name":"a"}]}`, 0, 20, "invalid JSON"},
		{"cut in a string", `{"tools":[{"name":"a"}]}`, 0, 17, "invalid JSON"},
		{"cut in a nested value", `{"tools":[{"name":"a","x":{"y":[1]}}]}`, 0, 31, "invalid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ed, err := l.EditValid([]byte(tc.doc), tc.start, tc.end, Edit{Hide: func(string) bool { return true }, Private: true})
			if err == nil || out != nil || ed != (Edited{}) {
				t.Fatalf("EditValid = %q, %+v, %v; want an error", out, ed, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "mcplist: tools/list result: ") {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestEditValidAliases: the names EditValid hands Hide share the
// document's memory (no allocation per item); Filter's are copies.
func TestEditValidAliases(t *testing.T) {
	l := mustList(t, "tools/list")
	doc := []byte(`{"tools":[{"name":"abc"}]}`)
	var got string
	if _, _, err := l.EditValid(doc, 0, len(doc), Edit{Hide: func(n string) bool { got = n; return false }}); err != nil {
		t.Fatal(err)
	}
	doc[20] = 'X'
	if got != "aXc" {
		t.Errorf("EditValid's name is %q after the document changed: a copy, want an alias", got)
	}
	if _, _, err := l.Filter(doc, func(n string) bool { got = n; return false }); err != nil {
		t.Fatal(err)
	}
	doc[20] = 'Y'
	if got != "aXc" {
		t.Errorf("Filter's name is %q after the result changed: want a copy", got)
	}
}
