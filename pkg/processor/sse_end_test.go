package processor_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// sseWithTrailers answers 200 text/event-stream with chunks, then trailers:
// no body chunk carries end_of_stream, the trailers end the body.
func sseWithTrailers(chunks ...string) envoytest.Upstream {
	return func(context.Context, *envoytest.UpstreamRequest) (*envoytest.UpstreamResponse, error) {
		var body [][]byte
		for _, c := range chunks {
			body = append(body, []byte(c))
		}
		return &envoytest.UpstreamResponse{
			Status:   http.StatusOK,
			Headers:  http.Header{"Content-Type": {"text/event-stream"}},
			Body:     body,
			Trailers: http.Header{"X-Done": {"1"}},
		}, nil
	}
}

// TestSSETrailersEndTheBody: a streamed SSE response asks for its trailers,
// the one end of the body Envoy signals when trailers follow. Complete
// events went out chunk by chunk; an event left unterminated at the
// trailers cannot be sent any more: dropped (as a conforming client drops
// it) when nothing hooked waits for it, and the stream reset when a hooked
// result may be in it and its plugins fail closed — never held silently.
func TestSSETrailersEndTheBody(t *testing.T) {
	guard := plugintest.NewScripted("post", cpex.ToolPostInvoke)
	h := newHarness(t, postGuard, guard)
	result := "data: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[]}}\n\n"

	res := h.do(mcpPost(echoCall), sseWithTrailers(result, "data: {\"unterminated\":"))
	if got := kinds(res.Sent); got[len(got)-1] != "response_trailers" {
		t.Errorf("messages %v: the trailers were not asked for", got)
	}
	if string(res.Body) != result || res.Trailers.Get("X-Done") != "1" {
		t.Errorf("client got %q, trailers %v; want the complete event and the trailers", res.Body, res.Trailers)
	}
	if guard.CallCount() != 1 {
		t.Errorf("post hook ran %d times, want 1", guard.CallCount())
	}

	ctx, cancel := context.WithTimeout(context.Background(), messageTimeout)
	defer cancel()
	res, err := h.filter.Do(ctx, mcpPost(echoCall), sseWithTrailers(result[:20], result[20:len(result)-2]))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Reset || strings.Contains(string(res.Body), "result") {
		t.Errorf("reset %v, client got %q: the pending result was held at the trailers; want a reset and nothing of it", res.Reset, res.Body)
	}
}
