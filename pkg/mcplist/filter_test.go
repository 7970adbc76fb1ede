package mcplist

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func mustList(t testing.TB, method string) *List {
	t.Helper()
	l, ok := ByMethod(method)
	if !ok {
		t.Fatalf("ByMethod(%q): not found", method)
	}
	return l
}

// hideSet hides the names in names; it records the names it was asked about.
type hideSet struct {
	names map[string]bool
	asked []string
}

func newHideSet(names ...string) *hideSet {
	h := &hideSet{names: map[string]bool{}}
	for _, n := range names {
		h.names[n] = true
	}
	return h
}

func (h *hideSet) hide(name string) bool {
	h.asked = append(h.asked, name)
	return h.names[name]
}

func TestByMethod(t *testing.T) {
	for _, tc := range []struct {
		method, items, name, call string
	}{
		{"tools/list", "tools", "name", "tools/call"},
		{"prompts/list", "prompts", "name", "prompts/get"},
		{"resources/list", "resources", "uri", "resources/read"},
		{"resources/templates/list", "resourceTemplates", "uriTemplate", "resources/read"},
	} {
		l := mustList(t, tc.method)
		if l.Method != tc.method || l.ItemsKey != tc.items || l.NameKey != tc.name || l.CallMethod != tc.call {
			t.Errorf("ByMethod(%q) = %+v", tc.method, *l)
		}
	}
	for _, m := range []string{"", "tools/call", "Tools/list", "tools/list ", "resources/templates"} {
		if l, ok := ByMethod(m); ok || l != nil {
			t.Errorf("ByMethod(%q) = %+v, %v; want nil, false", m, l, ok)
		}
	}
	var all []string
	for l := range All() {
		if b, _ := ByMethod(l.Method); b != l {
			t.Errorf("All yields %+v, ByMethod another entry", *l)
		}
		all = append(all, l.Method)
	}
	if len(all) != 4 {
		t.Errorf("All = %v, want the four list methods", all)
	}
}

func TestFilter(t *testing.T) {
	const pretty = `{
  "tools": [
    {
      "name": "a"
    },
    {
      "name": "b"
    },
    {
      "name": "c"
    }
  ],
  "nextCursor": "abc"
}`
	for _, tc := range []struct {
		name    string
		method  string // tools/list when empty
		in      string
		hide    []string
		want    string // == in when empty and dropped == 0
		dropped int
		asked   []string // the names hide is asked about, in order; nil: not checked
	}{
		{name: "none dropped", in: `{"tools":[{"name":"a"},{"name":"b"}]}`, hide: []string{"x"}, asked: []string{"a", "b"}},
		{name: "first", in: `{"tools":[{"name":"a"},{"name":"b"},{"name":"c"}]}`, hide: []string{"a"},
			want: `{"tools":[{"name":"b"},{"name":"c"}]}`, dropped: 1},
		{name: "middle", in: `{"tools":[{"name":"a"},{"name":"b"},{"name":"c"}]}`, hide: []string{"b"},
			want: `{"tools":[{"name":"a"},{"name":"c"}]}`, dropped: 1},
		{name: "last", in: `{"tools":[{"name":"a"},{"name":"b"},{"name":"c"}]}`, hide: []string{"c"},
			want: `{"tools":[{"name":"a"},{"name":"b"}]}`, dropped: 1},
		{name: "first two", in: `{"tools":[{"name":"a"},{"name":"b"},{"name":"c"}]}`, hide: []string{"a", "b"},
			want: `{"tools":[{"name":"c"}]}`, dropped: 2},
		{name: "last two", in: `{"tools":[{"name":"a"},{"name":"b"},{"name":"c"}]}`, hide: []string{"b", "c"},
			want: `{"tools":[{"name":"a"}]}`, dropped: 2},
		{name: "alternate", in: `{"tools":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"d"},{"name":"e"}]}`, hide: []string{"b", "d"},
			want: `{"tools":[{"name":"a"},{"name":"c"},{"name":"e"}]}`, dropped: 2},
		{name: "ends", in: `{"tools":[{"name":"a"},{"name":"b"},{"name":"c"}]}`, hide: []string{"a", "c"},
			want: `{"tools":[{"name":"b"}]}`, dropped: 2},
		{name: "all", in: `{"tools":[{"name":"a"},{"name":"b"}],"nextCursor":"n"}`, hide: []string{"a", "b"},
			want: `{"tools":[],"nextCursor":"n"}`, dropped: 2},
		{name: "only one", in: `{"tools":[{"name":"a"}]}`, hide: []string{"a"}, want: `{"tools":[]}`, dropped: 1},
		{name: "empty array", in: `{"tools":[]}`, hide: []string{""}, asked: []string{}},
		{name: "empty array with space", in: `{"tools":[ ]}`, hide: []string{""}},
		{name: "items missing", in: `{"nextCursor":"x","_meta":{}}`, hide: []string{""}, asked: []string{}},
		{name: "empty object", in: `{}`, hide: []string{""}},
		{name: "spaces", in: ` { "tools" : [ {"name":"a"} , {"name":"b"} , {"name":"c"} ] } `, hide: []string{"b"},
			want: ` { "tools" : [ {"name":"a"} , {"name":"c"} ] } `, dropped: 1},
		{name: "spaces first", in: `{"tools":[ {"name":"a"} , {"name":"b"} ]}`, hide: []string{"a"},
			want: `{"tools":[ {"name":"b"} ]}`, dropped: 1},
		{name: "spaces all", in: `{"tools": [ {"name":"a"} ] ,"x":1}`, hide: []string{"a"},
			want: `{"tools": [] ,"x":1}`, dropped: 1},
		{name: "pretty first", in: pretty, hide: []string{"a"}, dropped: 1,
			want: "{\n  \"tools\": [\n    {\n      \"name\": \"b\"\n    },\n    {\n      \"name\": \"c\"\n    }\n  ],\n  \"nextCursor\": \"abc\"\n}"},
		{name: "pretty middle", in: pretty, hide: []string{"b"}, dropped: 1,
			want: "{\n  \"tools\": [\n    {\n      \"name\": \"a\"\n    },\n    {\n      \"name\": \"c\"\n    }\n  ],\n  \"nextCursor\": \"abc\"\n}"},
		{name: "pretty last", in: pretty, hide: []string{"c"}, dropped: 1,
			want: "{\n  \"tools\": [\n    {\n      \"name\": \"a\"\n    },\n    {\n      \"name\": \"b\"\n    }\n  ],\n  \"nextCursor\": \"abc\"\n}"},
		{name: "pretty all", in: pretty, hide: []string{"a", "b", "c"}, dropped: 3,
			want: "{\n  \"tools\": [],\n  \"nextCursor\": \"abc\"\n}"},
		{name: "escaped name key", in: `{"tools":[{"na\u006de":"a"},{"name":"b"}]}`, hide: []string{"a"},
			want: `{"tools":[{"name":"b"}]}`, dropped: 1},
		{name: "escaped items key", in: `{"\u0074ools":[{"name":"a"},{"name":"b"}]}`, hide: []string{"a"},
			want: `{"\u0074ools":[{"name":"b"}]}`, dropped: 1},
		{name: "escaped name value", in: `{"tools":[{"name":"\u0061"},{"name":"a\/b\n"}]}`, hide: []string{"a", "a/b\n"},
			want: `{"tools":[]}`, dropped: 2, asked: []string{"a", "a/b\n"}},
		{name: "unicode name", in: `{"tools":[{"name":"é\ud83d\ude00"},{"name":"x"}]}`, hide: []string{"é😀"},
			want: `{"tools":[{"name":"x"}]}`, dropped: 1},
		{name: "non-string name", in: `{"tools":[{"name":5},{"name":null},{"name":{"x":"a"}},{"name":["a"]},{"name":"a"}]}`, hide: []string{"a"},
			want: `{"tools":[{"name":5},{"name":null},{"name":{"x":"a"}},{"name":["a"]}]}`, dropped: 1,
			asked: []string{"", "", "", "", "a"}},
		{name: "hide the nameless", in: `{"tools":[{"name":5},{"title":"t"},{"name":"a"}]}`, hide: []string{""},
			want: `{"tools":[{"name":"a"}]}`, dropped: 2},
		{name: "name key nested only", in: `{"tools":[{"inputSchema":{"name":"a"},"_meta":{"name":"a"}}]}`, hide: []string{"a"},
			asked: []string{""}},
		{name: "items key nested only", in: `{"_meta":{"tools":[{"name":"a"}]},"x":{"tools":[{"name":"a"}]}}`, hide: []string{"a"},
			asked: []string{}},
		{name: "other members kept", in: `{"_meta":{"k":[1,{"tools":2}]},"tools":[{"_meta":{"a":1},"name":"a","x":[]},{"name":"b","annotations":{"readOnlyHint":true},"name2":"a"}],"nextCursor":"c\u0075r","zz":null}`,
			hide: []string{"a"}, dropped: 1,
			want: `{"_meta":{"k":[1,{"tools":2}]},"tools":[{"name":"b","annotations":{"readOnlyHint":true},"name2":"a"}],"nextCursor":"c\u0075r","zz":null}`},
		{name: "duplicates elsewhere", in: `{"tools":[{"name":"a","inputSchema":{"type":"object","type":"object"},"x":1,"x":2},{"name":"b"}],"nextCursor":"1","nextCursor":"2"}`,
			hide: []string{"b"}, dropped: 1,
			want: `{"tools":[{"name":"a","inputSchema":{"type":"object","type":"object"},"x":1,"x":2}],"nextCursor":"1","nextCursor":"2"}`},
		{name: "nested arrays in items", in: `{"tools":[{"name":"a","s":[[],[[{}]],"]"]},{"name":"b","s":"},{"}]}`, hide: []string{"a"},
			want: `{"tools":[{"name":"b","s":"},{"}]}`, dropped: 1},
		{name: "prompts", method: "prompts/list", in: `{"prompts":[{"name":"p","arguments":[{"name":"q"}]},{"name":"q"}],"tools":[{"name":"p"}]}`,
			hide: []string{"p"}, dropped: 1, want: `{"prompts":[{"name":"q"}],"tools":[{"name":"p"}]}`},
		{name: "resources", method: "resources/list", in: `{"resources":[{"uri":"file:///a","name":"x"},{"uri":"file:///b","name":"file:///a"}]}`,
			hide: []string{"file:///a"}, dropped: 1, want: `{"resources":[{"uri":"file:///b","name":"file:///a"}]}`},
		{name: "templates", method: "resources/templates/list", in: `{"resourceTemplates":[{"uriTemplate":"db://{t}","name":"t"},{"uri":"db://{t}","uriTemplate":"x://{y}"}],"resources":[]}`,
			hide: []string{"db://{t}"}, dropped: 1, want: `{"resourceTemplates":[{"uri":"db://{t}","uriTemplate":"x://{y}"}],"resources":[]}`},
		{name: "templates ignore uri", method: "resources/templates/list", in: `{"resourceTemplates":[{"uri":"a","name":"a"}]}`,
			hide: []string{"a"}, asked: []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "tools/list"
			}
			in := []byte(tc.in)
			h := newHideSet(tc.hide...)
			out, dropped, err := mustList(t, method).Filter(in, h.hide)
			if err != nil {
				t.Fatalf("Filter: %v", err)
			}
			if string(in) != tc.in {
				t.Fatalf("Filter modified its input to %s", in)
			}
			want := tc.want
			if want == "" {
				want = tc.in
				if len(out) > 0 && &out[0] != &in[0] {
					t.Error("nothing dropped but the result was copied")
				}
			}
			if string(out) != want || dropped != tc.dropped {
				t.Errorf("Filter =\n%s, %d; want\n%s, %d", out, dropped, want, tc.dropped)
			}
			if !json.Valid(out) {
				t.Errorf("output is not valid JSON")
			}
			if tc.asked != nil && strings.Join(h.asked, "|") != strings.Join(tc.asked, "|") || tc.asked != nil && len(h.asked) != len(tc.asked) {
				t.Errorf("hide asked about %q, want %q", h.asked, tc.asked)
			}
		})
	}
}

func TestFilterErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string // tools/list when empty
		in     string
		want   string // in the error message
	}{
		{name: "empty", in: ``, want: "no JSON value"},
		{name: "blank", in: " \n\t", want: "no JSON value"},
		{name: "array", in: `[{"tools":[]}]`, want: "not an object"},
		{name: "string", in: `"tools"`, want: "not an object"},
		{name: "null", in: `null`, want: "not an object"},
		{name: "items object", in: `{"tools":{"name":"a"}}`, want: `"tools" is an object, not an array`},
		{name: "items null", in: `{"tools":null}`, want: "null, not an array"},
		{name: "items string", in: `{"tools":"[]"}`, want: "not an array"},
		{name: "item number", in: `{"tools":[1]}`, want: "tools[0] is a number, not an object"},
		{name: "item string later", in: `{"tools":[{"name":"a"},"b"]}`, want: "tools[1] is a string"},
		{name: "item array", in: `{"tools":[{"name":"a"},[]]}`, want: "tools[1] is an array"},
		{name: "item null", in: `{"tools":[null]}`, want: "tools[0] is null"},
		{name: "duplicate items", in: `{"tools":[],"x":1,"tools":[{"name":"a"}]}`, want: "duplicate member \"tools\""},
		{name: "duplicate items escaped", in: `{"tools":[],"\u0074ools":[]}`, want: "duplicate"},
		{name: "duplicate items case", in: `{"tools":[{"name":"a"}],"Tools":[]}`, want: "duplicate member \"Tools\""},
		{name: "items case first", in: `{"TOOLS":[],"tools":[]}`, want: `"TOOLS" differs from "tools" only in case`},
		{name: "items case only", in: `{"Tools":[{"name":"a"}]}`, want: "only in case"},
		{name: "items long s", method: "resources/list", in: `{"reſources":[{"uri":"a"}]}`, want: "only in case"},
		{name: "duplicate templates", method: "resources/templates/list", in: `{"resourceTemplates":[],"resourceTemplates":[]}`, want: "duplicate"},
		{name: "duplicate name", in: `{"tools":[{"name":"a","name":"b"}]}`, want: `tools[0]: duplicate member "name"`},
		{name: "duplicate name case", in: `{"tools":[{"name":"b"},{"name":"a","NAME":"b"}]}`, want: `tools[1]: duplicate member "NAME"`},
		{name: "duplicate name non-string", in: `{"tools":[{"name":1,"name":"b"}]}`, want: "duplicate"},
		{name: "name case only", in: `{"tools":[{"Name":"a"}]}`, want: `"Name" differs from "name" only in case`},
		{name: "uri case", method: "resources/list", in: `{"resources":[{"uri":"a","URI":"b"}]}`, want: "duplicate"},
		{name: "uriTemplate case", method: "resources/templates/list", in: `{"resourceTemplates":[{"uritemplate":"a"}]}`, want: "only in case"},
		{name: "truncated", in: `{"tools":[{"name":"a"}`, want: "unexpected EOF"},
		{name: "truncated in item", in: `{"tools":[{"name":"a","x":{`, want: "unexpected EOF"},
		{name: "trailing comma items", in: `{"tools":[{"name":"a"},]}`, want: "invalid character"},
		{name: "trailing comma item", in: `{"tools":[{"name":"a",}]}`, want: "invalid character"},
		{name: "trailing comma result", in: `{"tools":[],}`, want: "invalid character"},
		{name: "missing comma", in: `{"tools":[{"name":"a"}{"name":"b"}]}`, want: "expecting ','"},
		{name: "bad value deep", in: `{"tools":[{"name":"a","x":[1,2,nul]}]}`, want: "invalid"},
		{name: "bad value elsewhere", in: `{"tools":[],"x":tru}`, want: "invalid"},
		{name: "data after", in: `{"tools":[]} {}`, want: "data after the result"},
		{name: "garbage after", in: `{"tools":[]}x`, want: "invalid character"},
		{name: "invalid utf-8", in: "{\"tools\":[{\"name\":\"a\",\"description\":\"\xff\"}]}", want: "UTF-8"},
		{name: "invalid utf-8 name", in: "{\"tools\":[{\"name\":\"a\xc3\"}]}", want: "UTF-8"},
		{name: "lone surrogate", in: `{"tools":[{"name":"\ud800"}]}`, want: "surrogate"},
		{name: "bad escape", in: `{"tools":[{"name":"\x"}]}`, want: "escape"},
		{name: "single quotes", in: `{'tools':[]}`, want: "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := tc.method
			if method == "" {
				method = "tools/list"
			}
			out, dropped, err := mustList(t, method).Filter([]byte(tc.in), func(string) bool { return true })
			if err == nil {
				t.Fatalf("Filter = %s, %d, nil; want an error", out, dropped)
			}
			if out != nil || dropped != 0 {
				t.Errorf("Filter returned %q, %d with the error", out, dropped)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "mcplist: "+method+" result: ") {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

// TestFilterLarge filters a result near the default inspection limit.
func TestFilterLarge(t *testing.T) {
	in := toolsResult(2500, 400) // ~1 MiB
	if len(in) < 1<<20-64<<10 {
		t.Fatalf("result is only %d bytes", len(in))
	}
	n := 0
	out, dropped, err := mustList(t, "tools/list").Filter(in, func(string) bool { n++; return n%4 == 1 })
	if err != nil {
		t.Fatal(err)
	}
	if dropped != 625 || !json.Valid(out) {
		t.Fatalf("dropped %d (want 625), valid %v", dropped, json.Valid(out))
	}
	var got, all struct{ Tools []json.RawMessage }
	if err := json.Unmarshal(in, &all); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	for i, raw := range got.Tools {
		if want := all.Tools[i+i/3+1]; !bytes.Equal(raw, want) {
			t.Fatalf("tool %d = %s, want %s", i, raw, want)
		}
	}
}
