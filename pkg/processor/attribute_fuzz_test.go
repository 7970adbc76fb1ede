package processor

import (
	"bytes"
	"context"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/hookfamily"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

// runGET feeds an SSE response in chunks through a GET stream of session
// "s", whose store knows id 1 (tools/call t, whose post hook rewrites every
// result to {"ok":true}) and id 2 (tools/list), and returns what the client
// receives.
func runGET(t *testing.T, chunks [][]byte) []byte {
	t.Helper()
	st := testStream(&fakeHooks{post: rewrite})
	_ = st.x.results.store.Record(context.Background(), "s", []byte("1"), attribution.Origin{Method: "tools/call", Name: "t"})
	_ = st.x.results.store.Record(context.Background(), "s", []byte("2"), attribution.Origin{Method: "tools/list"})
	get := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
		Headers: headerMap(":method", "GET", ":path", "/mcp", "mcp-session-id", "s", "last-event-id", "e0"), EndOfStream: true}}}
	st.handle(get)
	st.handle(responseHeaders(200, "content-type", "text/event-stream"))
	return feedResponse(t, st, chunks)
}

// eventsOf decodes a whole SSE stream (a last unterminated event included).
func eventsOf(b []byte) []sse.Event {
	d := sse.NewDecoder(0)
	evs, err := d.Feed(b)
	if err != nil {
		return nil
	}
	out := make([]sse.Event, 0, len(evs)+1)
	for _, e := range evs {
		e.Raw, e.Data, e.ID = bytes.Clone(e.Raw), bytes.Clone(e.Data), bytes.Clone(e.ID)
		out = append(out, e)
	}
	if e, ok := d.Flush(); ok {
		out = append(out, e)
	}
	return out
}

// FuzzForeignResponses: whatever a GET stream replays and however it is cut
// into chunks, no result leaves unhooked: a response to the post-hooked id 1
// is rewritten (or is not a result: an error, input_required), a response
// to an id the store does not know is an error, the tools/list answer (id
// 2) and everything that is no response pass as they came, and the events
// keep their ids.
func FuzzForeignResponses(f *testing.F) {
	f.Add([]byte("event: message\nid: e1\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[]}}\n\n"), uint64(0x2814))
	f.Add([]byte("id: p\ndata: {}\n\nid: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"tools\":[]}}\n\nid: e3\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}\n\n"), uint64(0x403f3e0a))
	f.Add([]byte("data: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}},{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"result\":{}}]\r\n\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\r\n\r\n"), uint64(0x0102030405))
	f.Add([]byte("data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"resultType\":\"input_required\"}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"sampling/createMessage\",\"params\":{}}\n\n"), uint64(7))
	f.Fuzz(func(t *testing.T, body []byte, seed uint64) {
		chunks := cut(body, seed)
		got := runGET(t, chunks)
		if whole := runGET(t, [][]byte{body}); !bytes.Equal(got, whole) {
			t.Fatalf("in chunks %q: client got %q, in one chunk %q", chunks, got, whole)
		}
		in, out := eventsOf(body), eventsOf(got)
		if len(in) != len(out) {
			t.Fatalf("%d events in, %d out: %q", len(in), len(out), got)
		}
		for i := range out {
			if !bytes.Equal(in[i].ID, out[i].ID) {
				t.Fatalf("event %d: id %q became %q", i, in[i].ID, out[i].ID)
			}
			checkForeign(t, in[i].Data, out[i].Data)
		}
	})
}

// checkForeign checks one event's data as it went out against as it came.
func checkForeign(t *testing.T, in, out []byte) {
	t.Helper()
	msgs, err := mcpmsg.Parse(out)
	if err != nil {
		if !bytes.Equal(in, out) {
			t.Fatalf("unparsable data changed: %q → %q", in, out)
		}
		return
	}
	call, _ := hookfamily.ByMethod("tools/call")
	for _, m := range msgs.Messages {
		if m.Kind != mcpmsg.KindResponse {
			continue
		}
		switch string(m.ID) {
		case "1":
			if _, hooked := call.HookedResult(m.Result); hooked && string(m.Result) != `{"ok":true}` {
				t.Fatalf("result of id 1 not hooked: %s", m.Result)
			}
		case "2":
		default:
			t.Fatalf("result of unknown id %s forwarded: %q", m.ID, out)
		}
	}
}
