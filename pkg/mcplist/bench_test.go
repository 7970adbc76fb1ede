package mcplist

import (
	"encoding/json"
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

// BenchmarkEditValid is the sidecar's work on a filtered tools/list of 200
// tools of ~330 bytes (internal/ruleset's shape: the first 50 named
// admin_<i> and hidden) inside its JSON-RPC message, against floors on
// the same bytes in the same run: json-valid (encoding/json's Valid),
// jsontext-valid (jsontext's IsValid) and copy (one copy of the message,
// what a mutation that changes nothing costs at least). filter is Filter,
// which validates; edit-valid is EditValid on a message Parse checked,
// framed, cacheScope made private.
func BenchmarkEditValid(b *testing.B) {
	var r strings.Builder
	r.WriteString(`{"tools":[`)
	for i := range 200 {
		if i > 0 {
			r.WriteByte(',')
		}
		name := fmt.Sprintf("tool_%d", i)
		if i < 50 {
			name = fmt.Sprintf("admin_%d", i)
		}
		fmt.Fprintf(&r, `{"description":"Does %s to the target and reports what changed.","inputSchema":{"properties":{"dryRun":{"description":"Report only.","type":"boolean"},"target":{"description":"What to act on.","type":"string"}},"required":["target"],"type":"object"},"name":%q}`, name, name)
	}
	r.WriteString(`]}`)
	const pre, post = `{"jsonrpc":"2.0","id":2,"result":`, `}`
	result := []byte(r.String())
	msg := []byte(pre + r.String() + post)
	hide := func(n string) bool { return strings.HasPrefix(n, "admin_") }
	l, _ := ByMethod("tools/list")
	b.Run("json-valid", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if !json.Valid(msg) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("jsontext-valid", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if !jsontext.Value(msg).IsValid() {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			sink = append([]byte(nil), msg...)
		}
	})
	b.Run("filter", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if _, n, err := l.Filter(result, hide); err != nil || n != 50 {
				b.Fatal(n, err)
			}
		}
	})
	b.Run("walk-only", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			if _, _, err := l.EditValid(msg, len(pre), len(msg)-len(post), Edit{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("edit-valid", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(msg)))
		for b.Loop() {
			out, ed, err := l.EditValid(msg, len(pre), len(msg)-len(post), Edit{Hide: hide, Private: true})
			if err != nil || ed.Dropped != 50 {
				b.Fatal(ed, err)
			}
			sink = out
		}
	})
}

// sink keeps the benchmarks' results alive.
var sink []byte
