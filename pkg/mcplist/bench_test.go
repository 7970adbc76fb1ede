package mcplist

import (
	"fmt"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// toolsResult returns a tools/list result of n realistic tools of about size
// bytes each (an inputSchema, annotations, _meta), pretty much as servers
// send them, with a nextCursor.
func toolsResult(n, size int) []byte {
	var b strings.Builder
	b.WriteString(`{"tools":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		start := b.Len()
		fmt.Fprintf(&b, `{"name":"tool-%04d","title":"Tool %d","description":"Does thing %d to the input and returns what it found.",`+
			`"inputSchema":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{`+
			`"query":{"type":"string","description":"What to look for"},"limit":{"type":"integer","minimum":1,"maximum":100}},`+
			`"required":["query"],"additionalProperties":false},`+
			`"annotations":{"readOnlyHint":true,"openWorldHint":false},"_meta":{"pad":"`, i, i, i)
		for b.Len()-start < size-3 {
			b.WriteByte('x')
		}
		b.WriteString(`"}}`)
	}
	b.WriteString(`],"nextCursor":"eyJvZmZzZXQiOjIwMH0="}`)
	return []byte(b.String())
}

// BenchmarkFilter filters a tools/list result of 200 tools of ~400 bytes,
// hiding every 4th by name (a map look-up, as a rule cache would do), and
// hiding none. validate-only is the floor to compare with: jsontext
// checking the same bytes, with no offsets and no names.
func BenchmarkFilter(b *testing.B) {
	in := toolsResult(200, 400)
	hidden := map[string]bool{}
	for i := 0; i < 200; i += 4 {
		hidden[fmt.Sprintf("tool-%04d", i)] = true
	}
	l, _ := ByMethod("tools/list")
	b.Run("validate-only", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(in)))
		for b.Loop() {
			if !jsontext.Value(in).IsValid(jsontext.AllowDuplicateNames(true)) {
				b.Fatal("invalid")
			}
		}
	})
	for _, bc := range []struct {
		name string
		hide func(string) bool
	}{
		{"drop-every-4th", func(n string) bool { return hidden[n] }},
		{"drop-none", func(string) bool { return false }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				if _, _, err := l.Filter(in, bc.hide); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
