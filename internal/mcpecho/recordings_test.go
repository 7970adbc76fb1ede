package mcpecho

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

// recorded reads testdata/mcp-replay/<name>.http (an HTTP/1.1 answer as
// curl -i prints it).
func recorded(t *testing.T, name string) reply {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "mcp-replay", name+".http"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	resp.Body.Close()
	// curl -i writes the body de-chunked but keeps Transfer-Encoding: take
	// the bytes after the head as they are.
	_, body, ok := bytes.Cut(raw, []byte("\r\n\r\n"))
	if !ok {
		t.Fatalf("%s: no end of head", name)
	}
	r := reply{Status: resp.StatusCode, Header: resp.Header, Body: body}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var d sse.Decoder
		evs, err := d.Feed(body)
		if err != nil {
			t.Fatalf("%s: sse: %v", name, err)
		}
		for _, e := range evs {
			r.Events = append(r.Events, event{ID: string(e.ID), Type: string(e.Type), Data: string(e.Data), HasData: len(bytes.TrimSpace(e.Data)) > 0})
		}
	}
	return r
}

// TestRecordedReplay pins what the recordings show: a POST stream starts
// with a priming event (an id, empty data), and a GET with Last-Event-ID
// set to it replays the tool's original response under its original event
// id — for the TypeScript SDK server and for the Go SDK server.
func TestRecordedReplay(t *testing.T) {
	for _, tt := range []struct{ post, get, id string }{
		{"post-tools-call-echo", "get-replay-after-priming", "2"},
		{"go-post-tools-call-progress", "go-get-replay-after-priming", "2"},
	} {
		post, get := recorded(t, tt.post), recorded(t, tt.get)
		if p := post.Events[0]; p.ID == "" || p.HasData {
			t.Errorf("%s: first event %+v is not a priming event", tt.post, p)
		}
		want, got := responses(t, post.Events)[tt.id], responses(t, get.Events)[tt.id]
		if len(want.Result) == 0 || string(got.Result) != string(want.Result) {
			t.Errorf("%s: replayed %s, want %s", tt.get, got.Result, want.Result)
		}
		last := post.Events[len(post.Events)-1]
		if gl := get.Events[len(get.Events)-1]; gl.ID != last.ID {
			t.Errorf("%s: replayed response has event id %q, the POST had %q", tt.get, gl.ID, last.ID)
		}
	}
}

// TestRecordedDroppedAndTasks: the TypeScript server replays a dropped
// POST's notifications and response after its priming id; a replay after
// the tasks/result stream's priming id carries the task's result and the
// later streams of the session, their priming events as "data: {}".
func TestRecordedDroppedAndTasks(t *testing.T) {
	dropped := recorded(t, "post-dropped-long-running")
	if len(dropped.Events) != 1 || dropped.Events[0].HasData {
		t.Fatalf("dropped POST: %d events", len(dropped.Events))
	}
	resumed := recorded(t, "get-resume-dropped")
	if _, ok := responses(t, resumed.Events)["3"]; !ok || len(resumed.Events) != 3 {
		t.Fatalf("resumed GET: %d events, response 3 present: %v", len(resumed.Events), ok)
	}
	replay := recorded(t, "get-replay-tasks-result")
	rs := responses(t, replay.Events)
	if !strings.Contains(string(rs["7"].Result), "Research Report: otters") || len(rs["8"].Result) == 0 {
		t.Fatalf("tasks replay: %v", rs)
	}
	if replay.Events[1].Data != "{}" {
		t.Fatalf("another stream's priming event replayed as %q, want {}", replay.Events[1].Data)
	}
}
