package processor_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// syncing is a Memory that counts the processor's Sync calls, as a store
// shared by replicas would be waited for.
type syncing struct {
	*attribution.Memory
	syncs atomic.Int64
}

func (s *syncing) Sync(context.Context) { s.syncs.Add(1) }

// TestSyncBeforeReplayableResponse: a stream that recorded its requests
// waits for a write-behind store before its response goes out when the
// response is SSE (a GET may resume it, through any replica); not for a
// JSON answer, which no GET can replay, nor without a session (nothing is
// recorded).
func TestSyncBeforeReplayableResponse(t *testing.T) {
	store := &syncing{Memory: attribution.New(attribution.Options{})}
	words := plugintest.NewScripted("words")
	words.SetFunc(rewriteWords(secret))
	h := newHarnessWith(t, wordsConfig, harnessOptions{proc: func(o *processor.Options) { o.Attribution = store }}, words)
	call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"message":"x"}}}`
	answer := `{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"x"}]}}`
	session := []string{"Mcp-Session-Id", "s-1"}
	for _, tt := range []struct {
		name    string
		session []string
		sse     bool
		want    int64
	}{
		{"SSE answer", session, true, 1},
		{"JSON answer", session, false, 0},
		{"SSE answer without a session", nil, true, 0},
	} {
		before := store.syncs.Load()
		up := jsonUpstream(http.StatusOK, answer)
		if tt.sse {
			up = sseUpstream([]byte("id: 1\ndata: " + answer + "\n\n"))
		}
		if res := h.do(mcpPost(call, tt.session...), up); res.Status != http.StatusOK {
			t.Fatalf("%s: status %d", tt.name, res.Status)
		}
		if got := store.syncs.Load() - before; got != tt.want {
			t.Errorf("%s: %d syncs, want %d", tt.name, got, tt.want)
		}
	}
}
