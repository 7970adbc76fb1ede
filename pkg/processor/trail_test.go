package processor

import (
	"testing"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/audit"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// TestServerSpanNamedAfterFirstMessage: a batch's server span is named,
// and carries the attributes of, the body's first message, with or
// without audit events (the later messages do not rename it).
func TestServerSpanNamedAfterFirstMessage(t *testing.T) {
	for _, audited := range []bool{false, true} {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		opts := &Options{Logger: zerolog.Nop(), Observer: nopObserver{}, Attribution: attribution.New(attribution.Options{}), Tracer: tp.Tracer("test")}
		if audited {
			opts.Audit = discardAuditor{}
		}
		set := &config.Extproc{MCPPaths: []string{"/mcp"}, MaxBodyBytes: 1 << 20}
		st := streamOf(&Snapshot{Settings: set, Hooks: &fakeHooks{preOnly: true}}, opts)
		st.handle(requestHeaders("POST", "/mcp", false))
		st.handle(requestBody(`[{"jsonrpc":"2.0","method":"notifications/initialized"},` +
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}},` +
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"b","arguments":{}}}]`))
		st.x.trail.finish()
		spans := rec.Ended()
		if len(spans) != 1 || spans[0].Name() != "notifications/initialized" {
			var names []string
			for _, s := range spans {
				names = append(names, s.Name())
			}
			t.Errorf("audited %v: spans %q, want one named after the first message", audited, names)
		}
	}
}

// discardAuditor takes every event and keeps none.
type discardAuditor struct{}

func (discardAuditor) Emit(audit.Event) bool { return true }
