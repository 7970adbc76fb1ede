package mcpmsg

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// BenchmarkParse parses the recorded request bodies and response messages.
// tools-list.1 is the ~8 KiB tools/list result; tools-list (request) the
// small tools/list request.
func BenchmarkParse(b *testing.B) {
	for _, dir := range []string{"requests", "responses"} {
		bodies := readDir(b, dir)
		names := make([]string, 0, len(bodies))
		for n := range bodies {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			body := bodies[n]
			b.Run(dir+"/"+n, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if _, err := Parse(body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkToolCall measures the standalone view (full validation of params).
func BenchmarkToolCall(b *testing.B) {
	params := []byte(`{"name":"trigger-long-running-operation","arguments":{"duration":2,"steps":4},"_meta":{"progressToken":"p-4"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ToolCall(params); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReplaceParams(b *testing.B) {
	body := readDir(b, "requests")["tools-call-progress"]
	pb, err := Parse(body)
	if err != nil {
		b.Fatal(err)
	}
	set := map[string][]byte{"arguments": []byte(`{"duration":1,"steps":1}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReplaceParams(pb.Messages[0], set); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseToolsList parses a tools/list answer of 200 tools (~66 KB,
// the shape of the processor's list budget): one pass over a large result.
func BenchmarkParseToolsList(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"jsonrpc":"2.0","id":2,"result":{"tools":[`)
	for i := range 200 {
		if i > 0 {
			sb.WriteByte(',')
		}
		name := fmt.Sprintf("tool_%d", i)
		fmt.Fprintf(&sb, `{"description":"Does %s to the target and reports what changed.","inputSchema":{"properties":{"target":{"description":"What to act on.","type":"string"}},"required":["target"],"type":"object"},"name":%q}`, name, name)
	}
	sb.WriteString(`]}}`)
	body := []byte(sb.String())
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Parse(body); err != nil {
			b.Fatal(err)
		}
	}
}
