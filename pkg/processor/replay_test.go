package processor_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/envoytest"
	"github.com/mcp-extproc/mcp-extproc/internal/mcpecho"
)

const v25 = "2025-11-25"

// goSession initializes a 2025-11-25 session on endpoint and returns its
// headers; the session is deleted at cleanup (the Go SDK server keeps a
// goroutine per session).
func goSession(t *testing.T, endpoint string) map[string]string {
	t.Helper()
	r := rpcDo(t, endpoint, http.MethodPost, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`, nil)
	sid := r.Header.Get("Mcp-Session-Id")
	if r.Status != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", r.Status, sid, r.Body)
	}
	h := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": v25}
	if r := rpcDo(t, endpoint, http.MethodPost, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); r.Status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", r.Status, r.Body)
	}
	t.Cleanup(func() { rpcDo(t, endpoint, http.MethodDelete, h, "", nil) })
	return h
}

func with(h map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// resumeAfterDrop resumes a stream whose POST the client dropped: the
// server may not have seen the POST end yet, and refuses a second reader
// of a stream it still serves ("conflicts with ongoing stream"), so the
// GET is tried again until it is served (at most 5 s).
func resumeAfterDrop(t *testing.T, endpoint string, h map[string]string) answer {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		a := rpcDo(t, endpoint, http.MethodGet, h, "", nil)
		if !strings.Contains(string(a.Body), "conflicts with ongoing stream") || time.Now().After(deadline) {
			return a
		}
	}
}

func echoRequest(id int, msg string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":%q}}}`, id, msg)
}

// TestReplayGoServer: with the Go SDK's resumable server (2025-11-25, event
// store), a post-hooked result never comes back unrewritten on a GET with
// Last-Event-ID: from the priming id, from every later id, after a dropped
// POST; a benign call works after each attempt; resuming a stream of
// notifications works.
func TestReplayGoServer(t *testing.T) {
	h, _ := wordsHarness(t)
	endpoint := h.front(mcpecho.ResumableHandler())
	s := goSession(t, endpoint)
	benign := func(id int) {
		t.Helper()
		r := rpcDo(t, endpoint, http.MethodPost, s, echoRequest(id, "hi"), nil)
		if got := responsesOf(t, r)[fmt.Sprint(id)]; !strings.Contains(string(got.Result), "echo: hi") {
			t.Fatalf("benign call %d: %s", id, r.Body)
		}
	}

	post := rpcDo(t, endpoint, http.MethodPost, s, echoRequest(2, "a secret"), nil)
	mustRewritten(t, "POST", post, "2")
	if len(post.Events) < 2 || post.Events[0].ID == "" || strings.TrimSpace(post.Events[0].Data) != "" {
		t.Fatalf("POST events %+v: want a priming event first", post.Events)
	}
	benign(3)
	for i, from := range post.Events[:len(post.Events)-1] {
		get := rpcDo(t, endpoint, http.MethodGet, with(s, "Last-Event-ID", from.ID), "", nil)
		mustRewritten(t, fmt.Sprintf("GET after event %d", i), get, "2")
		if last := get.Events[len(get.Events)-1]; last.ID != post.Events[len(post.Events)-1].ID {
			t.Errorf("replayed result has event id %q, want %q", last.ID, post.Events[len(post.Events)-1].ID)
		}
		benign(10 + i)
	}

	// A client drops the POST after the priming event, then resumes.
	dropped := rpcDo(t, endpoint, http.MethodPost, s, echoRequest(4, "another secret"), func(event) bool { return true })
	get := resumeAfterDrop(t, endpoint, with(s, "Last-Event-ID", dropped.Events[0].ID))
	mustRewritten(t, "GET after a dropped POST", get, "4")
	benign(5)

	// A stream of notifications resumes: progress events replayed, the
	// result passes its post hook.
	prog := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":"p"}}}`, nil)
	if len(prog.Events) != 4 {
		t.Fatalf("progress POST: %d events %q", len(prog.Events), prog.Body)
	}
	resumed := rpcDo(t, endpoint, http.MethodGet, with(s, "Last-Event-ID", prog.Events[0].ID), "", nil)
	if len(resumed.Events) != 3 || !strings.Contains(resumed.Events[0].Data, "notifications/progress") {
		t.Fatalf("resumed progress stream: %q", resumed.Body)
	}
	if r := responsesOf(t, resumed)["6"]; !strings.Contains(string(r.Result), "done after 2 steps") {
		t.Fatalf("resumed result: %s", resumed.Body)
	}
	benign(7)
}

// replayFile is a TypeScript SDK recording (internal/mcpecho/testdata).
func replayFile(t *testing.T, name string) recorded {
	return loadHTTP(t, "../../../internal/mcpecho/testdata/mcp-replay/"+name+".http")
}

// TestReplayTypeScriptRecordings: the recorded traffic of the TypeScript
// SDK's server (server-everything, 2025-11-25) through the processor, in
// the order it was recorded: the echo result, its replay on a GET after the
// priming id, a dropped POST resumed on a GET, a task created, its result
// read with tasks/result and replayed on a GET together with another
// stream's priming event (data: {}) and a tasks/list answer. Every tool
// result reaches the client rewritten; everything else passes. A GET from
// a session the sidecar never saw is refused.
func TestReplayTypeScriptRecordings(t *testing.T) {
	h, plug := wordsHarness(t)
	plug.SetFunc(rewriteWords("hello replay", "Duration", "otters"))
	const sid = "ed426494-0646-4807-a034-4a27d49843a0"
	session := []string{"Mcp-Session-Id", sid, "Mcp-Protocol-Version", v25}
	post := func(body string, rec string) *envoytest.Result {
		r := replayFile(t, rec)
		return h.do(mcpPost(body, session...), r.upstream(r.body))
	}
	get := func(from, rec, sess string) *envoytest.Result {
		r := replayFile(t, rec)
		req := &envoytest.Request{Method: http.MethodGet, Path: "/mcp", Authority: "mcp.example",
			Headers: http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {sess}, "Last-Event-Id": {from}}}
		return h.do(req, r.upstream(r.body))
	}
	check := func(what string, res *envoytest.Result, id string, word string) {
		t.Helper()
		body := string(res.Body)
		if strings.Contains(body, word) || !strings.Contains(body, rewritten) {
			t.Fatalf("%s: %q still holds %q or is not rewritten", what, body, word)
		}
		if !strings.Contains(body, `"id":`+id) {
			t.Fatalf("%s: no response %s in %q", what, id, body)
		}
	}

	res := post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello replay"}}}`, "post-tools-call-echo")
	check("POST echo", res, "2", "hello replay")
	res = get("d4b7ba67-96ec-4fa1-9674-284e09cd6fb3", "get-replay-after-priming", sid)
	check("GET after priming", res, "2", "hello replay")
	if !strings.Contains(string(res.Body), "id: f72e9131-5130-4cf2-abad-f98d0637e019") {
		t.Errorf("event id lost: %q", res.Body)
	}

	res = post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":2,"steps":2},"_meta":{"progressToken":"p3"}}}`, "post-dropped-long-running")
	res = get("1eaf122b-d9a9-40ff-8ad7-6095f199495f", "get-resume-dropped", sid)
	check("GET resuming a dropped POST", res, "3", "Duration")
	if strings.Count(string(res.Body), "notifications/progress") != 2 {
		t.Errorf("progress notifications lost: %q", res.Body)
	}

	res = post(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"simulate-research-query","arguments":{"topic":"otters"},"task":{"ttl":300000}}}`, "post-tools-call-task")
	if !strings.Contains(string(res.Body), "3005d3a33d8b8342e961c667414e61a7") {
		t.Fatalf("CreateTaskResult: %q", res.Body)
	}
	res = post(`{"jsonrpc":"2.0","id":7,"method":"tasks/result","params":{"taskId":"3005d3a33d8b8342e961c667414e61a7"}}`, "post-tasks-result")
	check("tasks/result", res, "7", "otters")
	res = post(`{"jsonrpc":"2.0","id":8,"method":"tasks/list"}`, "post-tasks-list")
	list := replayFile(t, "post-tasks-list")
	if string(res.Body) != string(list.body) {
		t.Errorf("tasks/list answer changed: %q", res.Body)
	}
	res = get("f54cad3f-e233-4b4e-876f-39536206c14f", "get-replay-tasks-result", sid)
	check("GET replaying tasks/result", res, "7", "otters")
	if !strings.Contains(string(res.Body), "data: {}\n") || !strings.Contains(string(res.Body), `"tasks":[{"taskId":"3005d3a33d8b8342e961c667414e61a7"`) {
		t.Errorf("other streams' events not passed: %q", res.Body)
	}

	res = get("d4b7ba67-96ec-4fa1-9674-284e09cd6fb3", "get-replay-after-priming", "a-session-never-seen")
	if strings.Contains(string(res.Body), "hello replay") || !strings.Contains(string(res.Body), `"error"`) {
		t.Errorf("unattributable replay: %q, want an error event", res.Body)
	}
}
