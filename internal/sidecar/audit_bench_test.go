package sidecar_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/sidecar"
)

// BenchmarkAuditedCall is a tools/call a rule reads, through the fake Envoy
// and the sidecar's gRPC server, with audit events off and on (file sink):
// what turning audit on costs a request end to end. No plugin, so that the
// cost is not hidden under a plugin's round trip.
//
//	go test -run '^$' -bench AuditedCall -benchtime 2000x -count 3 ./internal/sidecar
func BenchmarkAuditedCall(b *testing.B) {
	for _, audit := range []bool{false, true} {
		b.Run(fmt.Sprintf("audit=%v", audit), func(b *testing.B) {
			cfg := "plugins: []\nextproc:\n  rules:\n    - name: no-danger\n      deny: 'mcp.name == \"danger\"'\n"
			if audit {
				cfg += fmt.Sprintf("  audit: {enabled: true, sink: file, path: %s}\n", filepath.Join(b.TempDir(), "audit.jsonl"))
			}
			sc := startSidecar(b, writeConfig(b, cfg), func(o *sidecar.Options) { o.Logger = zerolog.Nop() })
			body := toolCall("safe", nil)
			b.ReportAllocs()
			for b.Loop() {
				res, err := sc.do(mcpPost(body), upstream(nil, nil, nil))
				if err != nil || res.UpstreamRequest == nil {
					b.Fatalf("exchange: %v", err)
				}
			}
		})
	}
}
