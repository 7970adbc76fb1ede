package processor_test

import (
	"compress/gzip"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/mcpecho"
	"github.com/mcp-extproc/mcp-extproc/internal/redistest"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution/redisstore"
	"github.com/mcp-extproc/mcp-extproc/pkg/mcpmsg"
	"github.com/mcp-extproc/mcp-extproc/pkg/processor"
)

// Ways a result could reach the client past the post hooks and the rules'
// list filter, each through the strict fake Envoy with a real Go SDK
// server: an id spelled as another value, a session named twice, an
// encoded answer; and a store that clients making up sessions could fill.

// TestIDSpelledAsAnotherValue: after a ping with id 3 in a session, a
// tools/list or a tools/call whose id is 3 spelled otherwise (3.0, 3e0,
// 30e-1) is refused at the request, JSON and SSE, so its answer can never
// be taken for the ping's. A string id with escapes is its value: the
// list answer matches it and is filtered.
func TestIDSpelledAsAnotherValue(t *testing.T) {
	for _, json := range []bool{true, false} {
		t.Run(fmt.Sprintf("json=%v", json), func(t *testing.T) {
			endpoint, _ := rulesFront(t, rulesServer(json))
			s := goSession(t, endpoint) // a guest: the rules hide tools from it
			if r := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, nil); responsesOf(t, r)["3"].Result == nil {
				t.Fatalf("ping: %q", r.Body)
			}
			for _, id := range []string{"3.0", "3e0", "30e-1", "3E0"} {
				r := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":`+id+`,"method":"tools/list"}`, nil)
				mustRefusedInvalid(t, "tools/list id "+id, r)
			}
			if r := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":"4","method":"ping"}`, nil); responsesOf(t, r)[`"4"`].Result == nil {
				t.Fatalf("ping: %q", r.Body)
			}
			list := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":"\u0035","method":"tools/list"}`, nil)
			checkListed(t, `tools/list id "\u0035"`, list, `"5"`)
		})
	}
	t.Run("tools/call", func(t *testing.T) {
		h, _ := wordsHarness(t)
		for _, up := range []struct {
			name    string
			handler http.Handler
		}{{"sse", mcpecho.ResumableHandler()}, {"json", mcpecho.Handler(true)}} {
			endpoint := h.front(up.handler)
			s := goSession(t, endpoint)
			rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":3,"method":"ping"}`, nil)
			for _, id := range []string{"3.0", "3e0", "30e-1"} {
				r := rpcDo(t, endpoint, http.MethodPost, s, strings.Replace(echoRequest(0, "a secret"), `"id":0`, `"id":`+id, 1), nil)
				if containsSecret(r) {
					t.Fatalf("%s: tools/call id %s: BYPASS, the secret reached the client: %q", up.name, id, r.Body)
				}
				mustRefusedInvalid(t, up.name+" tools/call id "+id, r)
			}
			mustRewritten(t, up.name+" tools/call id 3", rpcDo(t, endpoint, http.MethodPost, s, echoRequest(3, "a secret"), nil), "3")
		}
	})
}

// mustRefusedInvalid fails unless a is the sidecar's 400 with an invalid
// request error.
func mustRefusedInvalid(t *testing.T, what string, a answer) {
	t.Helper()
	r, ok := responsesOf(t, answer{Body: a.Body})["null"]
	if a.Status != http.StatusBadRequest || !ok || r.Error == nil || r.Error.Code != mcpmsg.CodeInvalidRequest {
		t.Fatalf("%s: %d %q, want 400 and an invalid request error", what, a.Status, a.Body)
	}
	if strings.Contains(string(a.Body), "delete_file") {
		t.Fatalf("%s: a hidden tool reached the client: %q", what, a.Body)
	}
}

// TestRepeatedSessionHeaders: a request that names its session, protocol
// version or resumed stream twice is refused before anything is recorded
// or looked up, so a list recorded under a decoy session can never be
// replayed unfiltered in the real one.
func TestRepeatedSessionHeaders(t *testing.T) {
	endpoint, _ := rulesFront(t, rulesServer(false))
	s := goSession(t, endpoint)
	base := http.Header{}
	for k, v := range s {
		base.Set(k, v)
	}
	ping := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":7,"method":"ping"}`, nil)
	if len(ping.Events) == 0 || ping.Events[0].ID == "" {
		t.Fatalf("ping: %q, want a primed event stream", ping.Body)
	}
	for _, tc := range []struct {
		name, method, header string
		values               []string
		body                 string
	}{
		{"POST with a decoy session", http.MethodPost, "Mcp-Session-Id", []string{s["Mcp-Session-Id"], "decoy"}, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`},
		{"POST with the decoy first", http.MethodPost, "Mcp-Session-Id", []string{"decoy", s["Mcp-Session-Id"]}, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`},
		{"POST with two versions", http.MethodPost, "Mcp-Protocol-Version", []string{v25, "2025-03-26"}, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`},
		{"GET resuming two streams", http.MethodGet, "Last-Event-Id", []string{ping.Events[0].ID, "other"}, ""},
		{"GET in two sessions", http.MethodGet, "Mcp-Session-Id", []string{s["Mcp-Session-Id"], "decoy"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := base.Clone()
			if tc.method == http.MethodGet {
				h.Set("Last-Event-Id", ping.Events[0].ID)
			}
			h[tc.header] = tc.values
			r := rpcDoHeader(t, endpoint, tc.method, h, tc.body, nil)
			mustRefusedInvalid(t, tc.name, r)
			if !strings.Contains(string(r.Body), strings.ToLower(tc.header)+" sent more than once") {
				t.Errorf("%s: %q does not name the header", tc.name, r.Body)
			}
		})
	}
	// The session still works, and its list is still filtered.
	checkListed(t, "tools/list afterwards", rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`, nil), "9")
}

// gzipped compresses upstream's answers with gzip: when the request
// accepts it (honour), or always (a middleware that ignores
// Accept-Encoding). It flushes with its writer, so event streams go out
// event by event.
func gzipped(upstream http.Handler, honour bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if honour && !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			upstream.ServeHTTP(w, r)
			return
		}
		gw := &gzipWriter{ResponseWriter: w, zw: gzip.NewWriter(w)}
		defer gw.zw.Close()
		upstream.ServeHTTP(gw, r)
	})
}

type gzipWriter struct {
	http.ResponseWriter
	zw          *gzip.Writer
	wroteHeader bool
}

func (g *gzipWriter) WriteHeader(code int) {
	if !g.wroteHeader {
		g.wroteHeader = true
		g.Header().Del("Content-Length")
		g.Header().Set("Content-Encoding", "gzip")
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	return g.zw.Write(b)
}

func (g *gzipWriter) Flush() {
	g.zw.Flush()
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestCompressedAnswers: a client asking for gzip gets its list filtered
// and its tool result hooked, JSON and SSE: the sidecar removes
// Accept-Encoding from requests whose answer it reads. An upstream that
// compresses regardless: a JSON answer is decoded, filtered or hooked and
// forwarded decoded; an event stream cannot be read event by event and is
// refused, never passed.
func TestCompressedAnswers(t *testing.T) {
	for _, honour := range []bool{true, false} {
		for _, json := range []bool{true, false} {
			t.Run(fmt.Sprintf("honour=%v/json=%v", honour, json), func(t *testing.T) {
				endpoint, _ := rulesFront(t, gzipped(rulesServer(json), honour))
				s := with(goSession(t, endpoint), "Accept-Encoding", "gzip")
				list := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil)
				if !honour && !json {
					mustRefusedEncoded(t, "tools/list", list, "2")
					return
				}
				if ce := list.Header.Get("Content-Encoding"); ce != "" {
					t.Fatalf("tools/list answer reached the client with content-encoding %q: %q", ce, list.Body)
				}
				checkListed(t, "tools/list", list, "2")
			})
		}
	}
	h, _ := wordsHarness(t)
	for _, honour := range []bool{true, false} {
		for _, up := range []struct {
			name    string
			handler http.Handler
			json    bool
		}{{"sse", mcpecho.ResumableHandler(), false}, {"json", mcpecho.Handler(true), true}} {
			endpoint := h.front(gzipped(up.handler, honour))
			s := with(goSession(t, endpoint), "Accept-Encoding", "gzip")
			r := rpcDo(t, endpoint, http.MethodPost, s, echoRequest(3, "a secret"), nil)
			what := fmt.Sprintf("honour=%v %s tools/call", honour, up.name)
			if !honour && !up.json {
				mustRefusedEncoded(t, what, r, "3")
				continue
			}
			mustRewritten(t, what, r, "3")
		}
	}
}

// mustRefusedEncoded fails unless a answers id with the sidecar's error
// for an answer it cannot read.
func mustRefusedEncoded(t *testing.T, what string, a answer, id string) {
	t.Helper()
	r, ok := responsesOf(t, a)[id]
	if !ok || r.Error == nil || !strings.Contains(r.Error.Message, "cannot be inspected") || containsSecret(a) || strings.Contains(string(a.Body), "delete_file") {
		t.Fatalf("%s: %d %q, want the answer refused as uninspectable", what, a.Status, a.Body)
	}
}

// madeUpFlood sends 20 POSTs with made-up session ids, each a batch of
// 1,100 pings, to endpoint; the server refuses every one.
func madeUpFlood(t *testing.T, endpoint string) {
	t.Helper()
	var batch strings.Builder
	batch.WriteByte('[')
	for i := range 1100 {
		if i > 0 {
			batch.WriteByte(',')
		}
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i)
	}
	batch.WriteByte(']')
	for i := range 20 {
		r := rpcDo(t, endpoint, http.MethodPost, map[string]string{"Mcp-Session-Id": fmt.Sprintf("made-up-%d", i), "Mcp-Protocol-Version": "2025-03-26"}, batch.String(), nil)
		if r.Status/100 == 2 {
			t.Fatalf("made-up session %d: the server accepted it (%d %.200q)", i, r.Status, r.Body)
		}
	}
}

// TestMadeUpSessionsCostTheStoreNothing: 20 POSTs with made-up session ids
// and 1,100-ping batches, all refused by the server, leave nothing in the
// store: in Redis (at most 100 keys, the bound; none in fact) and
// in memory, where a real session then records and replays as before.
func TestMadeUpSessionsCostTheStoreNothing(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		store, err := redisstore.New(redisstore.Options{Addrs: []string{srv.Addr()}, OpTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		endpoint, _ := rulesFrontWith(t, rulesServer(false), harnessOptions{proc: func(o *processor.Options) { o.Attribution = store }})
		madeUpFlood(t, endpoint)
		store.Sync(t.Context())
		n, err := srv.Client(t).DBSize(t.Context()).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n > 100 {
			t.Fatalf("%d keys in Redis after the made-up sessions, want at most 100", n)
		}
		t.Logf("%d keys in Redis after 20 made-up sessions of 1,100 pings", n)
		s := goSession(t, endpoint)
		post := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil)
		checkListed(t, "POST", post, "2")
		checkListed(t, "GET replay", rpcDo(t, endpoint, http.MethodGet, with(s, "Last-Event-ID", post.Events[0].ID), "", nil), "2")
	})
	t.Run("memory", func(t *testing.T) {
		mem := attribution.New(attribution.Options{MaxRequestsPerSession: 8, MaxRequests: 64})
		endpoint, _ := rulesFrontWith(t, rulesServer(false), harnessOptions{proc: func(o *processor.Options) { o.Attribution = mem }})
		madeUpFlood(t, endpoint)
		if st := mem.Stats(); st.Requests != 0 || st.Sessions != 0 {
			t.Fatalf("memory store after the made-up sessions: %+v, want empty", st)
		}
		s := goSession(t, endpoint)
		post := rpcDo(t, endpoint, http.MethodPost, s, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, nil)
		checkListed(t, "GET replay", rpcDo(t, endpoint, http.MethodGet, with(s, "Last-Event-ID", post.Events[0].ID), "", nil), "2")
		if st := mem.Stats(); st.Requests == 0 {
			t.Fatalf("a real session recorded nothing: %+v", st)
		}
	})
}
