package mcpconn

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// TestSessionRTVerdicts checks which answers mark a session lost
// (docs/plugin-protocol.md) and which are one call's refusal.
func TestSessionRTVerdicts(t *testing.T) {
	tests := []struct {
		name        string
		session     string // Mcp-Session-Id sent
		status      int
		contentType string
		body        string
		wantLost    bool
		wantRefused bool // the answer is the call's ErrRefused, the session kept
	}{
		{"ok", "s1", 200, "application/json", `{"jsonrpc":"2.0","id":1,"result":{}}`, false, false},
		{"go-sdk 404 plain", "s1", 404, "text/plain", "session not found\n", true, false},
		{"python 404 -32600", "s1", 404, "application/json", `{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Session not found"}}`, true, false},
		{"typescript 404 -32001", "s1", 404, "application/json", `{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}`, true, false},
		{"typescript 400 no valid session", "s1", 400, "application/json", `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"}}`, true, false},
		{"400 other", "s1", 400, "application/json", `{"jsonrpc":"2.0","error":{"code":-32602,"message":"Invalid params"}}`, false, true},
		{"404 without session", "", 404, "text/plain", "not found", false, true},
		{"400 without session", "", 400, "text/plain", "no valid session", false, true},
		{"502", "s1", 502, "text/plain", "bad gateway", true, false},
		{"503 no endpoints", "", 503, "text/plain", "no healthy upstream", true, false},
		{"504", "s1", 504, "text/plain", "", true, false},
		{"500 is a plugin bug, not a lost session", "s1", 500, "text/plain", "boom", false, true},
		{"413", "s1", 413, "text/plain", "too large", false, true},
		{"431", "s1", 431, "text/plain", "", false, true},
		{"429", "s1", 429, "text/plain", "slow down", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			rt := newSessionRT(srv.Client().Transport, nil)
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
			if tt.session != "" {
				req.Header.Set(sessionHeader, tt.session)
			}
			ctx, ex := withCallRecord(context.Background())
			resp, err := rt.RoundTrip(req.WithContext(ctx))
			if tt.wantRefused {
				if !errors.Is(err, wireconn.ErrRefused) || !ex.answered.Load() || ex.gone.Load() {
					t.Errorf("RoundTrip = %v, answered %v, gone %v; want ErrRefused, answered", err, ex.answered.Load(), ex.gone.Load())
				}
				if rt.lostErr() != nil {
					t.Errorf("refusal marked the session lost: %v", rt.lostErr())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ex.gone.Load() != tt.wantLost {
				t.Errorf("call record gone = %v, want %v", ex.gone.Load(), tt.wantLost)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != tt.body {
				t.Errorf("body = %q, %v; want %q intact", body, err, tt.body)
			}
			if lost := rt.lostErr() != nil; lost != tt.wantLost {
				t.Errorf("lost = %v (%v), want %v", lost, rt.lostErr(), tt.wantLost)
			}
		})
	}
}

// A connection that ends is no verdict on the session: only answers are.
func TestSessionRTTransportErrors(t *testing.T) {
	// Connection refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rt := newSessionRT(http.DefaultTransport, nil)
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader(`{}`))
	if _, err := rt.RoundTrip(req); err == nil {
		t.Fatal("RoundTrip to a closed port succeeded")
	}
	if rt.lostErr() != nil {
		t.Errorf("connection refused marked the session lost: %v (only the server's word does)", rt.lostErr())
	}

	// The caller giving up is not a lost session.
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(block)
	rt = newSessionRT(srv.Client().Transport, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ = http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{}`))
	if _, err := rt.RoundTrip(req); err == nil {
		t.Fatal("RoundTrip with cancelled ctx succeeded")
	}
	if rt.lostErr() != nil {
		t.Errorf("caller cancellation marked the session lost: %v", rt.lostErr())
	}

	// A server killed mid-answer.
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\"")
		w.(http.Flusher).Flush()
		conn, _, _ := http.NewResponseController(w).Hijack()
		conn.Close()
	}))
	defer cut.Close()
	rt = newSessionRT(cut.Client().Transport, nil)
	req, _ = http.NewRequest(http.MethodPost, cut.URL, strings.NewReader(`{}`))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		t.Fatal("cut body read without error")
	}
	if rt.lostErr() != nil {
		t.Errorf("a body cut mid-answer marked the session lost: %v (only the server's word does)", rt.lostErr())
	}
}

func TestSessionRTRetireAndDelete(t *testing.T) {
	var mu sync.Mutex
	var methods []string
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		methods = append(methods, r.Method)
		mu.Unlock()
		if r.Method == http.MethodPost {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)

	// A live session's DELETE goes out.
	rt := newSessionRT(srv.Client().Transport, nil)
	del := func(rt *sessionRT) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodDelete, srv.URL, nil)
		req.Header.Set(sessionHeader, "s1")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			t.Fatalf("DELETE status %d", resp.StatusCode)
		}
	}
	rt.shutdown(context.Background())
	del(rt)
	mu.Lock()
	if len(methods) != 1 || methods[0] != http.MethodDelete {
		t.Errorf("server saw %v, want one DELETE", methods)
	}
	methods = nil
	mu.Unlock()

	// Retiring aborts requests in flight, refuses new ones, and skips the
	// DELETE of the dead session.
	rt = newSessionRT(srv.Client().Transport, nil)
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
		req.Header.Set(sessionHeader, "s2")
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for {
		mu.Lock()
		n := len(methods)
		mu.Unlock()
		if n == 1 {
			break
		}
		waitABit()
	}
	rt.retire(errSessionRetired)
	if err := <-errc; err == nil {
		t.Error("request in flight survived retire")
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
	if _, err := rt.RoundTrip(req); err != errSessionRetired {
		t.Errorf("request after retire = %v, want errSessionRetired", err)
	}
	del(rt)
	mu.Lock()
	if len(methods) != 1 || methods[0] != http.MethodPost {
		t.Errorf("server saw %v, want only the aborted POST (no DELETE)", methods)
	}
	mu.Unlock()
}

func TestWithHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	defer srv.Close()
	rt := newSessionRT(srv.Client().Transport, nil)
	ctx := wireconn.WithHeaders(context.Background(), http.Header{
		"Traceparent":    {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"x-request-id":   {"req-42"},
		"Mcp-Session-Id": {"evil"},
		"Content-Type":   {"text/plain"},
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader(`{}`))
	req.Header.Set(sessionHeader, "s1")
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h := <-got
	for k, want := range map[string]string{
		"Traceparent":    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"X-Request-Id":   "req-42",
		"Mcp-Session-Id": "s1",
		"Content-Type":   "application/json",
	} {
		if h.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, h.Get(k), want)
		}
	}
	if req.Header.Get("Traceparent") != "" {
		t.Error("RoundTrip modified the caller's request")
	}
}

// A session-gone answer says which connection it came on, so that a rebuild
// after a new connection reached another replica reads as such in the log.
func TestSessionGoneNamesItsConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "session not found", http.StatusNotFound)
	}))
	defer srv.Close()
	for dials, want := range map[int64]string{1: "the connection the session was made on", 2: "connection #2"} {
		rt := newSessionRT(srv.Client().Transport, func() int64 { return dials })
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
		req.Header.Set(sessionHeader, "s1")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		lost := rt.lostErr()
		if !errors.Is(lost, wireconn.ErrSessionGone) || !strings.Contains(lost.Error(), want) {
			t.Errorf("%d dials: lost = %v, want ErrSessionGone mentioning %q", dials, lost, want)
		}
	}
}

// A call without a trace context or caller headers pays nothing for the
// propagation: no _meta, the request untouched.
func TestNoTraceAllocatesNothing(t *testing.T) {
	ctx := context.WithValue(context.Background(), callRecordKey{}, &callRecord{})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1/mcp", nil)
	n := testing.AllocsPerRun(100, func() {
		if traceMeta(ctx) != nil || withCallerHeaders(req, ctx) != req {
			t.Fatal("something added without a trace context")
		}
	})
	if n != 0 {
		t.Errorf("%v allocations without a trace context, want 0", n)
	}
}
