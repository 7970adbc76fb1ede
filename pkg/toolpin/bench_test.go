package toolpin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
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

// resultOf is the result of a list of method holding items.
func resultOf(tb testing.TB, method string, items [][]byte) (*mcplist.List, []byte) {
	tb.Helper()
	l, ok := mcplist.ByMethod(method)
	if !ok {
		tb.Fatalf("no list %s", method)
	}
	return l, []byte(`{"` + l.ItemsKey + `":[` + string(bytes.Join(items, []byte(","))) + `],"nextCursor":"2"}`)
}

// BenchmarkCheck200 checks a list of 200 tools in mode record, on_change
// alert, with the memory store: cold (a new Pinner: every definition
// fingerprinted and pinned) and warm (the same list again: the steady
// state of a server that answers the same bytes). Check is given the
// items; CheckResult the list result; items+Check is what a caller of
// Check does to get the items (a walk of the result) and Check.
func BenchmarkCheck200(b *testing.B) {
	ctx := context.Background()
	items := toolList(b, benchTools, "")
	l, result := resultOf(b, "tools/list", items)
	checkItems := func(b *testing.B, p *Pinner) {
		if ch, err := p.Check(ctx, "s", Tool, items); err != nil || len(ch) != 0 {
			b.Fatal(ch, err)
		}
	}
	walkCheck := func(b *testing.B, p *Pinner) {
		var got [][]byte
		if _, _, err := l.FilterItems(result, func(_ string, item []byte) bool {
			got = append(got, item)
			return false
		}); err != nil {
			b.Fatal(err)
		}
		if ch, err := p.Check(ctx, "s", Tool, got); err != nil || len(ch) != 0 {
			b.Fatal(ch, err)
		}
	}
	checkResult := func(b *testing.B, p *Pinner) {
		if ch, err := p.CheckResult(ctx, "s", l, result); err != nil || len(ch) != 0 {
			b.Fatal(ch, err)
		}
	}
	for _, bc := range []struct {
		name string
		f    func(*testing.B, *Pinner)
	}{{"Check", checkItems}, {"items+Check", walkCheck}, {"CheckResult", checkResult}} {
		b.Run(bc.name+"/cold", func(b *testing.B) {
			b.SetBytes(int64(len(result)))
			b.ReportAllocs()
			for b.Loop() {
				bc.f(b, newRecordAlert(b))
			}
		})
		b.Run(bc.name+"/warm", func(b *testing.B) {
			p := newRecordAlert(b)
			bc.f(b, p)
			b.SetBytes(int64(len(result)))
			b.ReportAllocs()
			for b.Loop() {
				bc.f(b, p)
			}
		})
	}
}
