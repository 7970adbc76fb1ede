package processor_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/internal/syncbuf"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// TestObservabilityModeNoReply: a filter in observability_mode waits for no
// reply and applies none; the processor sends none (the fake lists any reply
// in Result.Ignored) and calls no plugin, whose verdict could not be
// enforced.
func TestObservabilityModeNoReply(t *testing.T) {
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke, cpex.ToolPostInvoke)
	h := newHarness(t, oneGuard, guard)
	f := h.filter
	f.ObservabilityMode = true
	f.Mode = &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED, ResponseBodyMode: filterv3.ProcessingMode_BUFFERED}
	ctx, cancel := context.WithTimeout(context.Background(), messageTimeout)
	defer cancel()
	res, err := f.Do(ctx, mcpPost(echoCall), jsonUpstream(http.StatusOK, `{"jsonrpc":"2.0","id":3,"result":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Sent) < 2 {
		t.Fatalf("the fake sent %d messages; the test needs several", len(res.Sent))
	}
	if len(res.Ignored) != 0 || len(res.Received) != 0 {
		t.Errorf("%d replies ignored, %d received: observability mode must get none", len(res.Ignored), len(res.Received))
	}
	if res.LocalError != "" || res.Status != http.StatusOK {
		t.Errorf("status %d, local error %q", res.Status, res.LocalError)
	}
	if n := guard.CallCount(); n != 0 {
		t.Errorf("plugin called %d times in observability mode", n)
	}
}

// TestFullDuplexRefused: a filter configured with FULL_DUPLEX_STREAMED
// (announced in protocol_config of the first message) is refused at the
// first message with a 500, loudly, never misparsed chunk by chunk.
func TestFullDuplexRefused(t *testing.T) {
	var logs syncbuf.Buffer
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke)
	h := newHarnessWith(t, oneGuard, harnessOptions{proc: func(o *processor.Options) { o.Logger = zerolog.New(&logs) }}, guard)
	f := h.filter
	f.Mode = &filterv3.ProcessingMode{
		RequestBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, RequestTrailerMode: filterv3.ProcessingMode_SEND,
	}
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), messageTimeout)
		res, err := f.Do(ctx, mcpPost(echoCall), noUpstream(t))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if !res.Immediate || res.Status != http.StatusInternalServerError || len(res.Sent) != 1 {
			t.Errorf("immediate %v status %d after %d messages (%s); want a 500 at the first message", res.Immediate, res.Status, len(res.Sent), res.LocalError)
		}
	}
	if n := guard.CallCount(); n != 0 {
		t.Errorf("plugin called %d times", n)
	}
	if got := strings.Count(logs.String(), "FULL_DUPLEX_STREAMED is not supported"); got != 1 {
		t.Errorf("%d log lines name the misconfiguration, want 1:\n%s", got, logs.String())
	}
}
