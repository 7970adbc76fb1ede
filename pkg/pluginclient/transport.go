package pluginclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// sessionHeader is the MCP session header (canonical form).
const sessionHeader = "Mcp-Session-Id"

// maxPeek is how much of a 400 answer is read to tell "no valid session"
// from other bad requests.
const maxPeek = 4 << 10

// maxQuote is how much of a refused answer's body an error quotes.
const maxQuote = 256

// errSessionRetired is what requests on a retired session fail with, without
// reaching the network.
var errSessionRetired = errors.New("plugin session retired")

type headersKey struct{}

// exchangeKey is the context key of the exchange of one call.
type exchangeKey struct{}

// exchange is what the RoundTripper saw of one call's request: whether the
// server answered it (a refusal, or a whole JSON body, however invalid), and
// whether its answer said the session is gone. A nil *exchange records
// nothing.
type exchange struct {
	answered, gone atomic.Bool
}

func (e *exchange) setAnswered() {
	if e != nil {
		e.answered.Store(true)
	}
}

func (e *exchange) setGone() {
	if e != nil {
		e.gone.Store(true)
	}
}

// withExchange returns ctx recording its HTTP answers in a new exchange.
func withExchange(ctx context.Context) (context.Context, *exchange) {
	ex := &exchange{}
	return context.WithValue(ctx, exchangeKey{}, ex), ex
}

// WithHeaders returns a copy of ctx whose plugin calls carry h as extra HTTP
// headers (for example the request's W3C traceparent or x-request-id). The
// headers are set on every HTTP request a call makes, replacing headers of
// the same name, except the ones the MCP transport owns (Content-Type,
// Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID) and
// hop-by-hop headers, which are never changed. h must not be modified after
// the call.
func WithHeaders(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, headersKey{}, h)
}

// protectedHeaders are never overridden by WithHeaders.
var protectedHeaders = map[string]bool{
	"Content-Type":         true,
	"Content-Length":       true,
	"Accept":               true,
	"Mcp-Session-Id":       true,
	"Mcp-Protocol-Version": true,
	"Last-Event-Id":        true,
	"Host":                 true,
	"Connection":           true,
	"Transfer-Encoding":    true,
	"Te":                   true,
	"Upgrade":              true,
	"Keep-Alive":           true,
}

// sessionRT is the http.RoundTripper of one MCP session. It is the seam
// where session loss is observed (docs/plugin-protocol.md §5): it
// records, from status codes and transport errors, that the server no
// longer has the session, and it cuts the session loose when it is retired
// or closed.
//
// Verdicts (only while the request's own context is alive):
//   - 404 to a request carrying Mcp-Session-Id (go-sdk plain text, Python
//     and TypeScript JSON-RPC bodies alike);
//   - 400 to a request carrying Mcp-Session-Id whose body mentions a
//     session ("No valid session ID provided"); other 400s are left alone,
//     since a deterministic bad request would otherwise rebuild forever;
//   - 502, 503, 504 (nothing behind the Kubernetes Service);
//   - any transport error: connection refused or reset, EOF, TLS failure;
//   - a response body that breaks off with an error (server killed while
//     answering).
type sessionRT struct {
	base http.RoundTripper

	ctx    context.Context // cancelled when the session is retired or closed
	cancel context.CancelFunc

	mu        sync.Mutex
	lost      error           // why the session is lost; nil while healthy
	deleteCtx context.Context // bounds the DELETE sent by Close; nil: no bound
}

func newSessionRT(base http.RoundTripper) *sessionRT {
	ctx, cancel := context.WithCancel(context.Background())
	return &sessionRT{base: base, ctx: ctx, cancel: cancel}
}

// lostErr returns why the session is considered lost, or nil.
func (rt *sessionRT) lostErr() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.lost
}

// markLost records the first reason the session is lost.
func (rt *sessionRT) markLost(err error) {
	rt.mu.Lock()
	if rt.lost == nil {
		rt.lost = err
	}
	rt.mu.Unlock()
}

// retire marks the session lost (so its DELETE is skipped: the server does
// not have it) and aborts its requests in flight, which then fail at once
// instead of waiting for a dead server.
func (rt *sessionRT) retire(why error) {
	rt.markLost(why)
	rt.cancel()
}

// shutdown prepares a graceful close: requests in flight are aborted, and the
// DELETE that ends a live session is bounded by ctx.
func (rt *sessionRT) shutdown(ctx context.Context) {
	rt.mu.Lock()
	rt.deleteCtx = ctx
	rt.mu.Unlock()
	rt.cancel()
}

// RoundTrip implements http.RoundTripper.
func (rt *sessionRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodDelete {
		return rt.roundTripDelete(req)
	}
	if err := rt.ctx.Err(); err != nil {
		closeBody(req)
		return nil, errSessionRetired
	}
	callerCtx := req.Context()
	ctx, release := detach(callerCtx, rt.ctx)

	out := req.WithContext(ctx)
	if h, _ := callerCtx.Value(headersKey{}).(http.Header); len(h) > 0 {
		out.Header = req.Header.Clone()
		for k, vs := range h {
			ck := http.CanonicalHeaderKey(k)
			if protectedHeaders[ck] || len(vs) == 0 {
				continue
			}
			out.Header[ck] = append([]string(nil), vs...)
		}
	}

	resp, err := rt.base.RoundTrip(out)
	if err != nil {
		release(false)
		if callerCtx.Err() == nil && rt.ctx.Err() == nil {
			rt.markLost(fmt.Errorf("%s %s: %w", req.Method, req.URL.Redacted(), err))
		}
		return nil, err
	}
	ex, _ := callerCtx.Value(exchangeKey{}).(*exchange)
	switch rt.classify(req, resp) {
	case sessionGone:
		ex.setGone()
	case refused:
		// The server answered this one request with a refusal. Handed to
		// the go-sdk as a response, a non-2xx without a JSON-RPC body
		// would break the whole connection; as a RoundTrip error it is
		// this call's error alone.
		ex.setAnswered()
		err := refusal(resp)
		release(false)
		return nil, err
	}
	release(true) // the answer is in: let the body drain past the caller's end
	wb := &watchedBody{ReadCloser: resp.Body, rt: rt, ctx: callerCtx, release: func() { release(false) }}
	if mediaType(resp.Header.Get("Content-Type")) == "application/json" {
		wb.ex = ex // a whole JSON body is the server's answer
	}
	resp.Body = wb
	return resp, nil
}

// verdict is what one HTTP answer says about the session.
type verdict int

const (
	// healthy: a 2xx answer, to be read by the go-sdk.
	healthy verdict = iota
	// sessionGone: the server no longer has the session (or nothing is
	// behind its address): rebuild.
	sessionGone
	// refused: the server refused this one request; the session is fine.
	refused
)

// classify tells from the status code what an answer says about the
// session, recording a session loss. See the package doc for the table.
func (rt *sessionRT) classify(req *http.Request, resp *http.Response) verdict {
	sid := req.Header.Get(sessionHeader)
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return healthy
	case code == http.StatusNotFound && sid != "":
		rt.markLost(fmt.Errorf("HTTP 404 for session %s", sid))
		return sessionGone
	case code == http.StatusBadRequest && sid != "" && peekMentionsSession(resp):
		rt.markLost(fmt.Errorf("HTTP 400 (no valid session) for session %s", sid))
		return sessionGone
	case code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		rt.markLost(fmt.Errorf("HTTP %d", code))
		return sessionGone
	case req.Method == http.MethodPost:
		return refused
	}
	return healthy // a GET or other request: the go-sdk judges it
}

// refusal turns a refused answer into the call's error, quoting the start
// of its body, and closes the body.
func refusal(resp *http.Response) error {
	defer resp.Body.Close()
	peek, _ := io.ReadAll(io.LimitReader(resp.Body, maxQuote))
	msg := strings.TrimSpace(string(peek))
	if msg == "" {
		return fmt.Errorf("%w: HTTP %d", ErrRefused, resp.StatusCode)
	}
	return fmt.Errorf("%w: HTTP %d: %q", ErrRefused, resp.StatusCode, msg)
}

// mediaType returns the media type of a Content-Type value, lower case.
func mediaType(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// peekMentionsSession reads the start of resp's body, puts it back, and
// reports whether it mentions a session.
func peekMentionsSession(resp *http.Response) bool {
	peek, _ := io.ReadAll(io.LimitReader(resp.Body, maxPeek))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(peek), resp.Body), resp.Body}
	return bytes.Contains(bytes.ToLower(peek), []byte("session"))
}

// roundTripDelete sends the DELETE that ends a session, unless the session
// is already lost (the server does not know it, or cannot be reached): then
// it answers 204 itself without touching the network.
func (rt *sessionRT) roundTripDelete(req *http.Request) (*http.Response, error) {
	rt.mu.Lock()
	lost, bound := rt.lost, rt.deleteCtx
	rt.mu.Unlock()
	if lost != nil {
		closeBody(req)
		return &http.Response{
			Status:     "204 No Content",
			StatusCode: http.StatusNoContent,
			Proto:      "HTTP/1.1",
			ProtoMajor: 1,
			ProtoMinor: 1,
			Header:     make(http.Header),
			Body:       http.NoBody,
			Request:    req,
		}, nil
	}
	if bound == nil {
		return rt.base.RoundTrip(req)
	}
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(bound, cancel)
	resp, err := rt.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, rt: nil, release: func() { stop(); cancel() }}
	return resp, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// watchedBody reports a body that breaks off (server gone mid-answer) as a
// session loss, and releases the request's context when closed.
type watchedBody struct {
	io.ReadCloser
	rt      *sessionRT      // nil: do not watch
	ex      *exchange       // non-nil: a body read to its end answers ex
	ctx     context.Context // the caller's request context
	release func()
	once    sync.Once
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.ex.setAnswered()
	}
	if err != nil && err != io.EOF && b.rt != nil && b.ctx.Err() == nil && b.rt.ctx.Err() == nil {
		b.rt.markLost(fmt.Errorf("response body: %w", err))
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

type readCloser struct {
	io.Reader
	io.Closer
}
