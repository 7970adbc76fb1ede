package processor

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/config"
)

// storeCap is the store's MaxRequests in TestAttributionMemoryFlat: below
// the default, so that the store is full after few requests (the test runs
// under the race detector), while 2 MiB of growth over 2*storeCap requests
// still shows a leak of 128 bytes a request.
const storeCap = 8192

// TestAttributionMemoryFlat: 4*storeCap hooked tools/call requests over 2000
// sessions, each answered, through streams sharing one store: the store
// stays within its bounds and the live heap stops growing once it is full.
func TestAttributionMemoryFlat(t *testing.T) {
	store := attribution.New(attribution.Options{MaxRequests: storeCap})
	opts := &Options{Logger: zerolog.Nop(), Observer: nopObserver{}, Attribution: store}
	snap := &Snapshot{Settings: &config.Extproc{MCPPaths: []string{"/mcp"}, MaxBodyBytes: 1 << 20}, Hooks: &fakeHooks{}}
	c := newCanned()
	run := func(from, to int) {
		for i := from; i < to; i++ {
			st := newStream(context.Background(), snap, hookFactsOf(snap), opts, c, nil)
			session := fmt.Sprintf("%08x-0000-4000-8000-%012x", i%2000, i%2000)
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"}}}`, i)
			st.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
				Headers: headerMap(":method", "POST", ":path", "/mcp", "mcp-session-id", session)}}})
			st.handle(requestBody(body))
			st.handle(responseHeaders(200, "content-type", "application/json"))
			st.handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{
				Body: []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[]}}`, i)), EndOfStream: true}}})
		}
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	run(0, 2*storeCap)
	full := heap()
	run(2*storeCap, 4*storeCap)
	after := heap()
	s := store.Stats()
	t.Logf("store %+v; heap %d KiB at %d requests, %d KiB at %d", s, full>>10, 2*storeCap, after>>10, 4*storeCap)
	if s.Requests > storeCap || s.Bytes > 16<<20 {
		t.Errorf("store over its bounds: %+v", s)
	}
	if s.Requests < storeCap/2 {
		t.Errorf("store holds only %d requests: not recording?", s.Requests)
	}
	if after > full+2<<20 {
		t.Errorf("heap grew from %d to %d KiB over %d more requests", full>>10, after>>10, 2*storeCap)
	}
}
