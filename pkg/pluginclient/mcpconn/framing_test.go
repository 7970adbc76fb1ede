package mcpconn

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func waitABit() { time.Sleep(time.Millisecond) }

// countingServer serves h and counts the TCP connections it accepts.
func countingServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestAnswersReadToTheirEnd is the framing matrix of the transport: the
// body of every answer is read to its end before it is closed, whatever
// the server's framing, so a session keeps its connection. The caller
// closes each body unread, as the go-sdk does with a notification's 202.
func TestAnswersReadToTheirEnd(t *testing.T) {
	tests := []struct {
		name   string
		answer func(w http.ResponseWriter)
		conns  int64 // connections for the three requests
	}{
		{"202 Content-Length 0 (Go, uvicorn)", func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) }, 1},
		{"202 chunked empty (Node.js)", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusAccepted)
			w.(http.Flusher).Flush()
		}, 1},
		{"200 JSON with Content-Length", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		}, 1},
		{"200 SSE chunked", func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n")
		}, 1},
		{"500 refusal with a long body", func(w http.ResponseWriter) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, strings.Repeat("x", 8<<10))
		}, 1},
		{"202 with Connection: close", func(w http.ResponseWriter) {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusAccepted)
		}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, conns := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				tt.answer(w)
			})
			tr := newTransport(srv.Client().Transport.(*http.Transport), "", "", false)
			rt := newSessionRT(tr, tr.dials.Load)
			for range 3 {
				req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
				req.Header.Set(sessionHeader, "s1")
				resp, err := rt.RoundTrip(req)
				if err == nil {
					resp.Body.Close() // unread
				}
			}
			if n := conns.Load(); n != tt.conns {
				t.Errorf("%d connections for 3 requests, want %d", n, tt.conns)
			}
			if err := rt.lostErr(); err != nil {
				t.Errorf("session marked lost: %v", err)
			}
		})
	}
}

// A body the server never ends is cut after drainTimeout: Close never
// hangs on it.
func TestDrainIsBounded(t *testing.T) {
	stop := make(chan struct{})
	srv, _ := countingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		for {
			if _, err := io.WriteString(w, "x"); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-stop:
				return
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	defer close(stop)
	rt := newSessionRT(srv.Client().Transport, nil)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		resp.Body.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(10 * drainTimeout):
		t.Fatal("Close of an endless body hangs")
	}
}

// dialTest dials a session to url with the package defaults.
func dialTest(t *testing.T, url string) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := Dial(ctx, Config{URL: url, Client: testClient(), Template: http.DefaultTransport.(*http.Transport)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
