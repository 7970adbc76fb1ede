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

// TestAttributionMemoryFlat: 100k hooked tools/call requests over 2000
// sessions, each answered, through streams sharing one store: the store
// stays within its bounds and the live heap stops growing once it is full.
func TestAttributionMemoryFlat(t *testing.T) {
	store := attribution.New(attribution.Options{})
	opts := &Options{Logger: zerolog.Nop(), Observer: nopObserver{}, Attribution: store}
	snap := &Snapshot{Settings: &config.Extproc{MCPPaths: []string{"/mcp"}, MaxBodyBytes: 1 << 20}, Hooks: &fakeHooks{}}
	c := newCanned()
	run := func(from, to int) {
		for i := from; i < to; i++ {
			st := newStream(context.Background(), snap, opts, c)
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
	run(0, 60_000)
	full := heap()
	run(60_000, 100_000)
	after := heap()
	s := store.Stats()
	t.Logf("store %+v; heap %d KiB at 60k requests, %d KiB at 100k", s, full>>10, after>>10)
	if s.Requests > 65536 || s.Bytes > 16<<20 {
		t.Errorf("store over its bounds: %+v", s)
	}
	if s.Requests < 30_000 {
		t.Errorf("store holds only %d requests: not recording?", s.Requests)
	}
	if after > full+2<<20 {
		t.Errorf("heap grew from %d to %d KiB between 60k and 100k requests", full>>10, after>>10)
	}
}
