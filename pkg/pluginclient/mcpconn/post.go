package mcpconn

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

// A hooked exchange waits for its invoke_hook call, so that call is made
// here, as one HTTP POST on the session the go-sdk made, read by this
// package: the go-sdk client decodes each message it reads with a fresh
// 32 KiB buffer and hands the answer between two goroutines, which cost a
// plugin call about a third of its time in memory (docs/benchmarks.md). The
// go-sdk still makes and ends the session (server/discover, initialize,
// DELETE), pings it and fetches plugin configs; a 2026-07-28 session, whose
// requests carry the protocol's per-request _meta, stays with it entirely.

// postCaller makes tools/call requests on one Streamable HTTP session of a
// protocol version before 2026-07-28.
type postCaller struct {
	client  *http.Client // the session's RoundTripper (sessionRT) under it
	url     string
	session string // Mcp-Session-Id; empty for a server that keeps none
	version string // Mcp-Protocol-Version
	ids     atomic.Int64

	// life ends when the session is retired or closed; it bounds the
	// cancellation notices. background holds them and the answers' bodies
	// still being drained; close waits for both.
	life       context.Context
	background sync.WaitGroup
}

// cancelTimeout bounds the notifications/cancelled sent for a call whose
// caller gave up: best-effort, like the DELETE at close.
const cancelTimeout = time.Second

// firstCallID is where the calls made here number their JSON-RPC ids: far
// above the go-sdk's own counter on the same session (it starts at 1), so
// no two requests in flight share an id, and within a JavaScript number's
// exact range.
const firstCallID = 1 << 40

// maxAnswer bounds how much of an answer is read: an invoke_hook reply
// carries a payload (a tool result after a post hook) and no more.
const maxAnswer = 64 << 20

// newPostCaller returns the caller for cs, or nil when cs negotiated a
// protocol this package does not speak itself (2026-07-28 and later).
func newPostCaller(life context.Context, cs *mcp.ClientSession, url string, rt http.RoundTripper) *postCaller {
	init := cs.InitializeResult()
	if init == nil {
		return nil
	}
	switch init.ProtocolVersion {
	case "2025-11-25", "2025-06-18", "2025-03-26":
	default:
		return nil
	}
	p := &postCaller{client: &http.Client{Transport: rt}, url: url, session: cs.ID(), version: init.ProtocolVersion, life: life}
	p.ids.Store(firstCallID)
	return p
}

// callRequest is a tools/call request as it goes on the wire.
type callRequest struct {
	JSONRPC string     `json:"jsonrpc"`
	ID      int64      `json:"id"`
	Method  string     `json:"method"`
	Params  callParams `json:"params"`
}

type callParams struct {
	Meta      mcp.Meta `json:"_meta,omitempty"`
	Name      string   `json:"name"`
	Arguments any      `json:"arguments"`
}

// rpcMessage is one JSON-RPC message read from an answer: the call's
// response, or a notification or request the server sent first.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *toolResult     `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// call makes one tools/call of the tool params names and returns its
// result. Its errors are for Session.classify: ex records what the
// RoundTripper heard, a JSON-RPC error is a *jsonrpc.Error, an answer that
// is not a response wraps cpex.ErrInvalidReply, and an answer cut off
// before the response is a plain error (no answer). A caller that gives up
// (ctx ends) before the response gets its error at once, and the server
// a notifications/cancelled for the call, as the go-sdk client sends.
func (p *postCaller) call(ctx context.Context, ex *callRecord, params *mcp.CallToolParams) (*toolResult, error) {
	id := p.ids.Add(1)
	res, err := p.post(ctx, ex, id, params)
	if err != nil && ctx.Err() != nil {
		p.cancel(id, context.Cause(ctx))
	}
	return res, err
}

// post is call's request and answer.
func (p *postCaller) post(ctx context.Context, ex *callRecord, id int64, params *mcp.CallToolParams) (*toolResult, error) {
	body, err := json.Marshal(callRequest{JSONRPC: "2.0", ID: id, Method: "tools/call",
		Params: callParams{Meta: params.Meta, Name: params.Name, Arguments: params.Arguments}})
	if err != nil {
		return nil, fmt.Errorf("encode tools/call: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("tools/call request: %w", err)
	}
	req.Header = p.headers()
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer p.finish(resp.Body)
	if db, ok := resp.Body.(*drainedBody); ok {
		// The RoundTripper lets an answer's body outlive its caller (for
		// the go-sdk, which reads on after handing the answer over); this
		// caller reads only until it has the answer.
		stop := context.AfterFunc(ctx, db.abort)
		defer stop()
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// What the RoundTripper did not turn into an error says the session
		// is gone (ex records it).
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	var msg *rpcMessage
	switch ct := mediaType(resp.Header.Get("Content-Type")); ct {
	case "application/json":
		msg, err = readJSONAnswer(resp.Body, id)
	case "text/event-stream":
		msg, err = readSSEAnswer(resp.Body, id)
	default:
		return nil, fmt.Errorf("%w: HTTP %d answer of type %q to tools/call", cpex.ErrInvalidReply, resp.StatusCode, ct)
	}
	if err != nil {
		return nil, err
	}
	ex.setAnswered()
	if msg.Error != nil {
		return nil, msg.Error
	}
	if msg.Result == nil {
		return nil, fmt.Errorf("%w: response without result or error", cpex.ErrInvalidReply)
	}
	return msg.Result, nil
}

// cancel tells the server, in the background and bounded by
// cancelTimeout and the session's life, that call id was given up.
func (p *postCaller) cancel(id int64, why error) {
	reason := "cancelled"
	if why != nil {
		reason = why.Error()
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": id, "reason": reason}})
	if err != nil {
		return
	}
	p.background.Go(func() {
		ctx, stop := context.WithTimeout(p.life, cancelTimeout)
		defer stop()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header = p.headers()
		if resp, err := p.client.Do(req); err == nil {
			_ = resp.Body.Close()
		}
	})
}

// finish closes an answer's body. One read to its end closes at once; one
// whose stream goes on after the response (the end of its framing not yet
// read, or a server that keeps it open) is drained in the background, as
// the go-sdk reads on after handing an answer over, so the caller does not
// wait for it (the drain is bounded by maxDrain and drainTimeout).
func (p *postCaller) finish(body io.ReadCloser) {
	if db, ok := body.(*drainedBody); ok && !db.eof {
		p.background.Go(func() { _ = db.Close() })
		return
	}
	_ = body.Close()
}

// close waits for the cancellation notices and drains in flight; the
// session's life must have ended (or be about to end) so that they do not
// wait long.
func (p *postCaller) close() {
	if p != nil {
		p.background.Wait()
	}
}

// headers are the headers of a request on the session.
func (p *postCaller) headers() http.Header {
	h := http.Header{
		"Content-Type":         {"application/json"},
		"Accept":               {"application/json, text/event-stream"},
		"Mcp-Protocol-Version": {p.version},
	}
	if p.session != "" {
		h[sessionHeader] = []string{p.session}
	}
	return h
}

// readJSONAnswer reads an application/json answer: the response to call
// id and nothing else.
func readJSONAnswer(body io.Reader, id int64) (*rpcMessage, error) {
	raw, err := io.ReadAll(io.LimitReader(body, maxAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if len(raw) > maxAnswer {
		return nil, fmt.Errorf("%w: answer larger than %d bytes", cpex.ErrInvalidReply, maxAnswer)
	}
	msg, ok, err := responseTo(raw, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: JSON answer is not the response to request %d", cpex.ErrInvalidReply, id)
	}
	return msg, nil
}

// readSSEAnswer reads a text/event-stream answer up to the response to
// call id, passing over what comes before it (a priming event, progress
// or log notifications). The stream ending first is no answer.
func readSSEAnswer(body io.Reader, id int64) (*rpcMessage, error) {
	dec := sse.NewDecoder(maxAnswer)
	buf := make([]byte, 4<<10)
	for {
		n, rerr := body.Read(buf)
		events, err := dec.Feed(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("%w: %w", cpex.ErrInvalidReply, err)
		}
		if rerr == io.EOF {
			if e, ok := dec.Flush(); ok {
				events = append(events, e)
			}
		}
		for _, e := range events {
			if len(bytes.TrimSpace(e.Data)) == 0 {
				continue
			}
			msg, ok, err := responseTo(e.Data, id)
			if err != nil {
				return nil, err
			}
			if ok {
				return msg, nil
			}
		}
		switch {
		case rerr == io.EOF:
			return nil, errors.New("event stream ended without the response")
		case rerr != nil:
			return nil, fmt.Errorf("read event stream: %w", rerr)
		}
	}
}

// responseTo decodes one JSON-RPC message and reports whether it is the
// response to request id. A notification is passed over; a request from
// the server cannot be served on this path (a plugin has no use for
// sampling, elicitation or roots) and fails the call, as does a response
// to another request.
func responseTo(raw []byte, id int64) (*rpcMessage, bool, error) {
	var msg rpcMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		return nil, false, fmt.Errorf("%w: not a JSON-RPC message: %v", cpex.ErrInvalidReply, err)
	}
	switch {
	case msg.Method != "" && len(msg.ID) == 0:
		return nil, false, nil // a notification
	case msg.Method != "":
		return nil, false, fmt.Errorf("%w: the server sent a %s request, which a plugin call does not serve", cpex.ErrInvalidReply, msg.Method)
	}
	var got int64
	if err := json.Unmarshal(msg.ID, &got); err != nil || got != id {
		return nil, false, fmt.Errorf("%w: response to request %s, not %d", cpex.ErrInvalidReply, msg.ID, id)
	}
	return &msg, true, nil
}
