package processor

import (
	"context"
	"net/http"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-extproc/mcp-extproc/pkg/logsafe"
)

// What a client sends in request headers reaches plugin calls: the trace
// headers and x-request-id as HTTP headers of every invoke_hook request, the
// forwarded headers inside the tool_pre_invoke payload. A plugin's HTTP
// server refuses headers it finds too large (Node: 16 KiB for all of them),
// and a refusal must never come from what one client chose to send. So each
// value is bounded here, before any plugin call is built; what exceeds its
// bound is not forwarded at all (a cut value would be a different value).
const (
	// MaxRequestIDBytes bounds x-request-id. Longer: the request gets a
	// generated id instead, for the plugins and the logs.
	MaxRequestIDBytes = 128
	// MaxForwardedHeaderBytes bounds the value of a header listed in
	// extproc.forward_headers (and of the user, tenant and server headers).
	// Longer: the header is left out of the plugin payload.
	MaxForwardedHeaderBytes = 4096
	// MaxTracestateBytes and MaxTracestateMembers are the W3C Trace Context
	// limits of tracestate. A tracestate beyond them, or malformed, is not
	// forwarded; traceparent is forwarded only when well formed, re-encoded
	// in its exact version-00 form (55 bytes).
	MaxTracestateBytes   = 512
	MaxTracestateMembers = 32
)

// rawHeaders are client header values as received, read only when a plugin
// call or a log line needs them.
type rawHeaders struct {
	requestID, traceparent, tracestate *corev3.HeaderValue
}

// dropped records a client header left out because of its size, for one
// debug line per stream.
type dropped struct {
	name  string
	bytes int
}

// dropHeader notes that header k of n bytes is not forwarded.
func (r *requestFacts) dropHeader(k string, n int) {
	r.droppedHeaders = append(r.droppedHeaders, dropped{name: logsafe.Cap(k, 64), bytes: n})
}

// logDropped logs, once per stream at debug, the headers left out.
func (r *requestFacts) logDropped(log *zerolog.Logger) {
	if len(r.droppedHeaders) == 0 || log.GetLevel() > zerolog.DebugLevel {
		return
	}
	arr := make([]string, 0, len(r.droppedHeaders))
	for _, d := range r.droppedHeaders {
		arr = append(arr, d.name)
	}
	log.Debug().Strs("headers", arr).Int("max_request_id_bytes", MaxRequestIDBytes).
		Int("max_forwarded_header_bytes", MaxForwardedHeaderBytes).Msg("oversized or malformed request headers not forwarded to plugins")
}

// boundedValue returns v when it fits in max bytes; else it records the
// header as dropped and returns ok false.
func (r *requestFacts) boundedValue(k, v string, max int) (string, bool) {
	if len(v) > max {
		r.dropHeader(k, len(v))
		return "", false
	}
	return v, true
}

// traceContext validates the request's W3C trace headers and returns them
// in canonical form for the plugin calls, or nil when traceparent is absent
// or malformed (a tracestate without a valid traceparent means nothing).
// Parsing is OpenTelemetry's (go.opentelemetry.io/otel/propagation):
// traceparent of version 00 exactly, later versions by their first four
// fields; tracestate by its member syntax and the 32-member limit, and here
// by its 512-byte limit.
func (r *requestFacts) traceContext() http.Header {
	parent, state := headerBytes(r.raw.traceparent), headerBytes(r.raw.tracestate)
	if len(parent) == 0 {
		if len(state) != 0 {
			r.dropHeader("tracestate", len(state))
		}
		return nil
	}
	in := make(http.Header, 2)
	in.Set("traceparent", string(parent))
	if len(state) > MaxTracestateBytes {
		r.dropHeader("tracestate", len(state))
	} else if len(state) != 0 {
		in.Set("tracestate", string(state))
	}
	var prop propagation.TraceContext
	sc := trace.SpanContextFromContext(prop.Extract(context.Background(), propagation.HeaderCarrier(in)))
	if !sc.IsValid() {
		r.dropHeader("traceparent", len(parent))
		return nil
	}
	if in.Get("tracestate") != "" && sc.TraceState().Len() == 0 {
		r.dropHeader("tracestate", len(state)) // malformed or over 32 members
	}
	out := make(http.Header, 3)
	prop.Inject(trace.ContextWithRemoteSpanContext(context.Background(), sc), propagation.HeaderCarrier(out))
	return out
}
