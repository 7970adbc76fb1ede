package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// transformStrings applies f to every string value of v (not to member
// names), as Rewrite does.
func transformStrings(v any, f func(string) string) any {
	switch x := v.(type) {
	case string:
		return f(x)
	case map[string]any:
		for k, e := range x {
			x[k] = transformStrings(e, f)
		}
	case []any:
		for i, e := range x {
			x[i] = transformStrings(e, f)
		}
	}
	return v
}

// FuzzRewrite: whatever the input, Rewrite never changes it in place; on a
// value encoding/json reads, rewriting every string (upper-cased, with a
// quote and a backslash added) gives the JSON that encoding/json reads as
// the same value with those strings, and changes nothing else.
func FuzzRewrite(f *testing.F) {
	f.Add([]byte(`{"name":"t","args":{"a":"x","b":[1,"y",{"c":null}],"d":"\u00e9\n"}}`), true)
	f.Add([]byte(`{"args":"plain"}`), true)
	f.Add([]byte(`["a",{"b":"c"},true,2.5e3]`), false)
	f.Add([]byte(`{"args":{"a":"\ud83d\ude00"}}`), true)
	f.Fuzz(func(t *testing.T, in []byte, member bool) {
		orig := bytes.Clone(in)
		name := ""
		if member {
			name = "args"
		}
		change := func(s string) string { return strings.ToUpper(s) + `"\` }
		out, changed, err := Walker{Decoders: &Decoders{}}.Rewrite(in, name, func(_ []string, s string) (string, bool) {
			return change(s), true
		})
		if !bytes.Equal(in, orig) {
			t.Fatal("Rewrite modified its input")
		}
		var v any
		if json.Unmarshal(in, &v) != nil || err != nil {
			return // not JSON, or a value jsontext refuses (duplicate names, bad UTF-8)
		}
		want := v
		if member {
			obj, ok := v.(map[string]any)
			if !ok {
				return
			}
			if a, ok := obj["args"]; ok {
				obj["args"] = transformStrings(a, change)
			}
		} else {
			want = transformStrings(v, change)
		}
		var got any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("Rewrite(%q) = %q, not JSON: %v", in, out, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Rewrite(%q) = %q\nreads as %#v\nwant     %#v", in, out, got, want)
		}
		if !changed && !bytes.Equal(out, in) {
			t.Fatalf("unchanged, but returned %q for %q", out, in)
		}
	})
}
