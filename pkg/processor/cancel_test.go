package processor_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/internal/plugintest"
	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

// TestCancelAtEveryBoundary cancels the ext_proc stream after each message
// of an exchange whose plugins are slow (pre and post hooks), including while
// a plugin call is in flight. Every cancellation must end the plugin call
// (the plugin sees its context done) and leave no goroutine behind
// (goleak.VerifyTestMain in this package checks the latter).
func TestCancelAtEveryBoundary(t *testing.T) {
	var inFlight atomic.Int64
	guard := plugintest.NewScripted("guard", cpex.ToolPreInvoke, cpex.ToolPostInvoke)
	guard.SetFunc(func(ctx context.Context, hook cpex.HookType, payload json.RawMessage, pctx *cpex.PluginContext) (*cpex.InvokeHookReply, error) {
		if hook == cpex.ToolPreInvoke {
			return nil, nil // continue
		}
		inFlight.Add(1)
		defer inFlight.Add(-1)
		select {
		case <-ctx.Done(): // released only by cancellation
			return nil, ctx.Err()
		case <-time.After(30 * time.Second):
			return nil, nil
		}
	})
	h := newHarness(t, oneGuard, guard)

	hdr := func(kv ...string) *corev3.HeaderMap {
		m := &corev3.HeaderMap{}
		for i := 0; i+1 < len(kv); i += 2 {
			m.Headers = append(m.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
		}
		return m
	}
	msgs := []*extprocv3.ProcessingRequest{
		{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: hdr(":method", "POST", ":path", "/mcp", "content-type", "application/json")}}},
		{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(echoCall), EndOfStream: true}}},
		{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{
			Headers: hdr(":status", "200", "content-type", "application/json")}}},
		{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
			Body: []byte(`{"jsonrpc":"2.0","id":3,"result":{"content":[]}}`), EndOfStream: true}}},
	}
	// Boundary k: send k messages and read their replies, then send
	// message k (if any) and cancel without waiting for its reply. At k=3
	// the post hook is in flight when the stream is cancelled.
	for k := 0; k <= len(msgs); k++ {
		ctx, cancel := context.WithCancel(context.Background())
		stream, err := h.filter.Client.Process(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < k && i < 3; i++ {
			if err := stream.Send(msgs[i]); err != nil {
				t.Fatalf("boundary %d: send %d: %v", k, i, err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatalf("boundary %d: recv %d: %v", k, i, err)
			}
		}
		if k < len(msgs) {
			stream.Send(msgs[k])
		}
		if k == 3 {
			waitFor(t, func() bool { return inFlight.Load() > 0 }, "the post hook call to start")
		}
		cancel()
		waitFor(t, func() bool { return inFlight.Load() == 0 }, "plugin calls to end after cancel")
	}
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
