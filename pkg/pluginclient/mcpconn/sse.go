package mcpconn

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// SSEConfig says how to reach a plugin server of the legacy HTTP+SSE
// transport (MCP 2024-11-05, mcp.proto SSE).
type SSEConfig struct {
	// URL is the server's SSE endpoint (mcp.url), the one a GET opens the
	// event stream on.
	URL string
	// Client is the go-sdk client the session is made with.
	Client *mcp.Client
	// Transport carries the GET stream and the POSTs (TLS applied). Nil:
	// http.DefaultTransport.
	Transport http.RoundTripper
}

// SSE is one legacy HTTP+SSE session: a [Stream] whose connection is the
// GET event stream; calls are POSTed to the endpoint it named, and
// answered on it.
type SSE struct {
	*Stream
	rt     *sseRT
	cancel context.CancelFunc // ends the GET stream
}

// DialSSE opens the event stream and connects the session, bounded by ctx.
// What a call's error means follows Stream, and, for the POST that carries
// it:
//
//	the POST got                                       error wraps
//	404 (the server does not know the session)         ErrConnLost, ErrSessionGone
//	400 whose body mentions a session ("session closed") ErrConnLost, ErrSessionGone
//	502, 503, 504                                      ErrConnLost, ErrUnavailable
//	any other non-2xx                                  wireconn.ErrRefused
//
// The go-sdk's SSE connection breaks on any failed POST, so a refused call
// also costs the session: later calls find it gone and it is rebuilt.
func DialSSE(ctx context.Context, cfg SSEConfig) (*SSE, error) {
	base := cfg.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	rt := &sseRT{base: base}
	t := &mcp.SSEClientTransport{Endpoint: cfg.URL, HTTPClient: &http.Client{Transport: rt}}
	// The GET stream lives as long as the session: it must not end with
	// ctx, which bounds only the connect. Close ends it.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	s, err := DialStream(life, cfg.Client, t, rt.goneErr)
	if !stop() && err == nil { // ctx ended during the connect
		_ = s.Close()
		err = ctx.Err()
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("connect %s: %w", cfg.URL, err)
	}
	return &SSE{Stream: s, rt: rt, cancel: cancel}, nil
}

// Close implements [wireconn.Conn]: the session and its GET stream end.
func (s *SSE) Close() error {
	defer s.cancel()
	return s.Stream.Close()
}

// sseRT sees the answers to a session's POSTs: one that says the session
// is gone marks it so; any other failure refuses that call.
type sseRT struct {
	base http.RoundTripper

	mu   sync.Mutex
	gone error
}

// goneErr returns why the server said the session is gone, or nil.
func (rt *sseRT) goneErr() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.gone
}

// RoundTrip implements http.RoundTripper. A POST carries the caller's
// headers and trace context as over Streamable HTTP (withCallerHeaders).
func (rt *sseRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost {
		req = withCallerHeaders(req.WithContext(req.Context()), req.Context()) // a copy: the caller's request stays as it is
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost || resp.StatusCode/100 == 2 {
		return resp, err
	}
	text := peekText(resp.Body)
	_ = drainClose(resp.Body, func() {})
	switch {
	case resp.StatusCode == http.StatusNotFound,
		// The go-sdk answers "session closed" to a POST whose session's
		// stream ended (a restart): gone, as 400 about a session is over
		// Streamable HTTP.
		resp.StatusCode == http.StatusBadRequest && strings.Contains(strings.ToLower(text), "session"):
		err := fmt.Errorf("%w: %w: HTTP %d %s", wireconn.ErrConnLost, wireconn.ErrSessionGone, resp.StatusCode, text)
		rt.mu.Lock()
		if rt.gone == nil {
			rt.gone = err
		}
		rt.mu.Unlock()
		return nil, err
	case resp.StatusCode == http.StatusBadGateway, resp.StatusCode == http.StatusServiceUnavailable, resp.StatusCode == http.StatusGatewayTimeout:
		return nil, fmt.Errorf("%w: %w: HTTP %d %s", wireconn.ErrConnLost, wireconn.ErrUnavailable, resp.StatusCode, text)
	}
	return nil, fmt.Errorf("%w: HTTP %d %s", wireconn.ErrRefused, resp.StatusCode, text)
}

// peekText returns the start of a refusal's body, for the error.
func peekText(body io.Reader) string {
	b := make([]byte, 256)
	n, _ := io.ReadFull(body, b)
	return strings.TrimSpace(string(b[:n]))
}
