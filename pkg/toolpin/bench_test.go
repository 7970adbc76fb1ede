package toolpin

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
)

// benchTools is the size of the list the benchmarks check: the 200 tools
// of internal/bench's tools/list (issue 30: pinning a 200-tool list costs
// at most 5 % of reading it).
const benchTools = 200

// toolList returns n tool definitions shaped as internal/bench lists them
// (a description and an input schema of two properties, ~330 bytes each),
// each as a list result holds it; tag changes every description.
func toolList(tb testing.TB, n int, tag string) [][]byte {
	tb.Helper()
	items := make([][]byte, n)
	for i := range items {
		name := fmt.Sprintf("tool_%d", i)
		b, err := json.Marshal(map[string]any{
			"name":        name,
			"description": "Does " + name + " to the target and reports what changed." + tag,
			"inputSchema": map[string]any{"type": "object", "required": []string{"target"}, "properties": map[string]any{
				"target": map[string]any{"type": "string", "description": "What to act on."},
				"dryRun": map[string]any{"type": "boolean", "description": "Report only."},
			}},
		})
		if err != nil {
			tb.Fatal(err)
		}
		items[i] = b
	}
	return items
}

func newRecordAlert(tb testing.TB) *Pinner {
	tb.Helper()
	p, err := New(Record, Alert, nil, NewMemory(0, 0, nil))
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// BenchmarkCheck200 checks a list of 200 tools in mode record, on_change
// alert, with the memory store: cold (a new Pinner: every definition
// fingerprinted and pinned) and warm (the same list again: the steady
// state of a server that answers the same bytes).
func BenchmarkCheck200(b *testing.B) {
	ctx := context.Background()
	items := toolList(b, benchTools, "")
	var size int
	for _, it := range items {
		size += len(it)
	}
	b.Run("cold", func(b *testing.B) {
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			p := newRecordAlert(b)
			if ch, err := p.Check(ctx, "s", Tool, items); err != nil || len(ch) != 0 {
				b.Fatal(ch, err)
			}
		}
	})
	b.Run("warm", func(b *testing.B) {
		p := newRecordAlert(b)
		if _, err := p.Check(ctx, "s", Tool, items); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(size))
		b.ReportAllocs()
		for b.Loop() {
			if ch, err := p.Check(ctx, "s", Tool, items); err != nil || len(ch) != 0 {
				b.Fatal(ch, err)
			}
		}
	})
}
