package mcpconn

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
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/pluginclient/wireconn"
)

// sessionHeader is the MCP session header (canonical form).
const sessionHeader = "Mcp-Session-Id"

const (
	// maxPeek is how much of a 400 answer is read to tell "no valid
	// session" from other bad requests.
	maxPeek = 4 << 10
	// maxQuote is how much of a refused answer's body an error quotes.
	maxQuote = 256
	// maxDrain is how much of an answer's unread rest is read before its
	// body is closed, so that its connection can be reused. An empty
	// chunked 202 (Node.js) still has its terminating chunk unread when the
	// go-sdk closes it; Go's transport closes a connection whose body was
	// not read to its end.
	maxDrain = 64 << 10
)

// errSessionRetired is what requests on a retired session fail with, without
// reaching the network.
var errSessionRetired = errors.New("plugin session retired")

// callRecordKey is the context key of the callRecord of one call.
type callRecordKey struct{}

// callRecord is what the RoundTripper saw of one call's requests: whether the
// server answered (a refusal, or a whole JSON body, however invalid), and
// whether an answer said the session is gone. A nil *callRecord records
// nothing.
type callRecord struct {
	answered, gone atomic.Bool
}

func (e *callRecord) setAnswered() {
	if e != nil {
		e.answered.Store(true)
	}
}

func (e *callRecord) setGone() {
	if e != nil {
		e.gone.Store(true)
	}
}

// withCallRecord returns ctx recording its HTTP answers in a new callRecord.
func withCallRecord(ctx context.Context) (context.Context, *callRecord) {
	ex := &callRecord{}
	return context.WithValue(ctx, callRecordKey{}, ex), ex
}

// protectedHeaders are never overridden by the caller's headers
// (wireconn.WithHeaders): the MCP transport and HTTP/1.1 own them.
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

// sessionRT is the http.RoundTripper of one MCP session, under the go-sdk's
// transport. It is where the server's word about the session is heard:
// it records an answer that says the server no longer has the session
// (package doc), reads every answer to its end before it is closed, and
// cuts the session loose when it is retired or closed. A connection that
// ends is not a verdict: the next request dials again.
type sessionRT struct {
	base  http.RoundTripper
	dials func() int64 // connections dialled so far; nil: unknown

	ctx    context.Context // cancelled when the session is retired or closed
	cancel context.CancelFunc

	mu        sync.Mutex
	lost      error           // why the server says the session is gone; nil while it lives
	deleteCtx context.Context // bounds the DELETE sent by Close; nil: no bound
}

func newSessionRT(base http.RoundTripper, dials func() int64) *sessionRT {
	ctx, cancel := context.WithCancel(context.Background())
	return &sessionRT{base: base, dials: dials, ctx: ctx, cancel: cancel}
}

// lostErr returns why the session is gone, or nil.
func (rt *sessionRT) lostErr() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.lost
}

// markLost records the first reason the session is gone.
func (rt *sessionRT) markLost(err error) {
	rt.mu.Lock()
	if rt.lost == nil {
		rt.lost = err
	}
	rt.mu.Unlock()
}

// retire marks the session gone (so its DELETE is skipped) and aborts its
// requests in flight, which then fail at once.
func (rt *sessionRT) retire(why error) {
	rt.markLost(why)
	rt.cancel()
}

// shutdown prepares a graceful close: requests in flight are aborted, and
// the DELETE that ends a live session is bounded by ctx.
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
	resp, err := rt.base.RoundTrip(withCallerHeaders(req.WithContext(ctx), callerCtx))
	if err != nil {
		release(false)
		return nil, err
	}
	ex, _ := callerCtx.Value(callRecordKey{}).(*callRecord)
	switch rt.classify(req, resp) {
	case sessionGone:
		ex.setGone()
	case refused:
		// The server answered this one request with a refusal. Handed to
		// the go-sdk as a response, a non-2xx without a JSON-RPC body
		// would break the whole connection; as a RoundTrip error it is
		// this call's error alone.
		ex.setAnswered()
		err := refusal(resp, func() { release(false) })
		release(false)
		return nil, err
	}
	release(true) // the answer is in: let the body drain past the caller's end
	wb := &drainedBody{ReadCloser: resp.Body, release: func() { release(false) }}
	if mediaType(resp.Header.Get("Content-Type")) == "application/json" {
		wb.ex = ex // a whole JSON body is the server's answer
	}
	resp.Body = wb
	return resp, nil
}

// withCallerHeaders returns out with the caller's headers
// (wireconn.WithHeaders on callerCtx) set, except the protected ones, and
// with the trace context of callerCtx's span context (wireconn.TraceContext)
// as its traceparent and tracestate: the span current when the plugin is
// called is the parent, whatever traceparent the caller's headers hold.
// Without headers or a span context it returns out as is, allocating
// nothing.
func withCallerHeaders(out *http.Request, callerCtx context.Context) *http.Request {
	h := wireconn.Headers(callerCtx)
	parent, state := wireconn.TraceContext(callerCtx)
	if len(h) == 0 && parent == "" {
		return out
	}
	out.Header = out.Header.Clone()
	if out.Header == nil {
		out.Header = make(http.Header, len(h)+2)
	}
	for k, vs := range h {
		ck := http.CanonicalHeaderKey(k)
		if protectedHeaders[ck] || len(vs) == 0 {
			continue
		}
		out.Header[ck] = append([]string(nil), vs...)
	}
	if parent != "" {
		out.Header.Set(wireconn.TraceparentKey, parent)
		// A tracestate belongs to its traceparent: the caller's goes
		// with the caller's.
		out.Header.Del(wireconn.TracestateKey)
		if state != "" {
			out.Header.Set(wireconn.TracestateKey, state)
		}
	}
	return out
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
		rt.markLost(fmt.Errorf("%w: HTTP 404 for session %s%s", wireconn.ErrSessionGone, sid, rt.redialed()))
		return sessionGone
	case code == http.StatusBadRequest && sid != "" && peekMentionsSession(resp):
		rt.markLost(fmt.Errorf("%w: HTTP 400 (no valid session) for session %s%s", wireconn.ErrSessionGone, sid, rt.redialed()))
		return sessionGone
	case code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		rt.markLost(fmt.Errorf("%w: HTTP %d", wireconn.ErrUnavailable, code))
		return sessionGone
	case req.Method == http.MethodPost:
		return refused
	}
	return healthy // a GET or other request: the go-sdk judges it
}

// redialed describes, for a session-gone message, whether the answer came
// on a connection dialled after the session's first one ended: behind a
// per-connection balancer that is another replica answering, not
// necessarily a restart.
func (rt *sessionRT) redialed() string {
	if rt.dials == nil {
		return ""
	}
	if n := rt.dials(); n > 1 {
		return fmt.Sprintf(", answered on the session's connection #%d (its earlier ones ended: a restart, or another replica behind a per-connection balancer)", n)
	}
	return ", answered on the connection the session was made on"
}

// refusal turns a refused answer into the call's error, quoting the start
// of its body, and closes the body read to its end (bounded; abort cuts
// the request).
func refusal(resp *http.Response, abort func()) error {
	defer drainClose(resp.Body, abort)
	peek, _ := io.ReadAll(io.LimitReader(resp.Body, maxQuote))
	msg := strings.TrimSpace(string(peek))
	if msg == "" {
		return fmt.Errorf("%w: HTTP %d", wireconn.ErrRefused, resp.StatusCode)
	}
	return fmt.Errorf("%w: HTTP %d: %q", wireconn.ErrRefused, resp.StatusCode, msg)
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
// is already gone (the server said so): then it answers 204 itself without
// touching the network.
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
	ctx, cancel := context.WithCancel(req.Context())
	stop := func() bool { return false }
	if bound != nil {
		stop = context.AfterFunc(bound, cancel)
	}
	resp, err := rt.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		stop()
		cancel()
		return nil, err
	}
	resp.Body = &drainedBody{ReadCloser: resp.Body, release: func() { stop(); cancel() }}
	return resp, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// drainedBody is the body of an answer handed to the go-sdk. Closed, it is
// first read to its end (bounded by maxDrain and drainTimeout), so that its
// connection is reused whatever the server's framing; then it releases the
// request's context. Read to its end, a JSON body answers ex.
type drainedBody struct {
	io.ReadCloser
	ex      *callRecord // non-nil: a body read to its end answers ex
	release func()
	eof     bool
	once    sync.Once
}

func (b *drainedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
		b.ex.setAnswered()
	}
	return n, err
}

// abort ends the request's context now: a read in progress fails, and
// Close does not drain.
func (b *drainedBody) abort() { b.once.Do(b.release) }

// drainTimeout bounds how long Close reads an answer's rest: a stream the
// server keeps open is cut (its connection then closes).
const drainTimeout = time.Second

func (b *drainedBody) Close() error {
	if b.eof {
		err := b.ReadCloser.Close()
		b.abort()
		return err
	}
	err := drainClose(b.ReadCloser, b.abort)
	b.abort()
	return err
}

// drainClose reads the rest of body, at most maxDrain bytes, and closes
// it. A body not done within drainTimeout is cut with abort, which must
// end the request's context.
func drainClose(body io.ReadCloser, abort func()) error {
	t := time.AfterFunc(drainTimeout, abort)
	_, _ = io.CopyN(io.Discard, body, maxDrain)
	t.Stop()
	return body.Close()
}

type readCloser struct {
	io.Reader
	io.Closer
}
