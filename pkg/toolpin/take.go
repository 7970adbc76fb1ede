package toolpin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/mcp-extproc/mcp-extproc/pkg/mcplist"
	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

// maxAnswer bounds one answer Take reads.
const maxAnswer = 16 << 20

// Take lists every tool, prompt and resource template the MCP server at
// url (Streamable HTTP) advertises, every page, and returns their
// snapshot. It speaks the protocol itself rather than through an SDK's
// types, so that the fingerprints cover the definitions exactly as the
// server sends them, as the sidecar sees them. A server that offers no
// prompts or templates (method not found) has none in the snapshot.
// client's timeout, or ctx, bounds it.
func Take(ctx context.Context, client *http.Client, url string) (*Snapshot, error) {
	t := taker{ctx: ctx, client: client, url: url}
	if _, err := t.call("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcp-extproc-snapshot","version":"1"}}`); err != nil {
		return nil, err
	}
	if err := t.notify("notifications/initialized"); err != nil {
		return nil, err
	}
	defer t.close()
	snap := &Snapshot{Version: SnapshotVersion, Server: url}
	for _, method := range []string{"tools/list", "prompts/list", "resources/templates/list"} {
		kind, _ := KindOfList(method)
		l, _ := mcplist.ByMethod(method)
		cursor := ""
		for page := 0; ; page++ {
			if page > 10000 {
				return nil, fmt.Errorf("snapshot: %s: more than 10000 pages", method)
			}
			params := `{}`
			if cursor != "" {
				b, _ := json.Marshal(map[string]string{"cursor": cursor})
				params = string(b)
			}
			result, err := t.call(method, params)
			if rpcErr, ok := err.(*rpcError); ok && rpcErr.Code == -32601 && method != "tools/list" {
				break // the server has none of these
			}
			if err != nil {
				return nil, err
			}
			var items [][]byte
			if _, _, err := l.FilterItems(result, func(_ string, item []byte) bool {
				items = append(items, item)
				return false
			}); err != nil {
				return nil, fmt.Errorf("snapshot: %w", err)
			}
			for _, item := range items {
				name, fp, err := Of(kind, item)
				if err != nil {
					return nil, fmt.Errorf("snapshot: %s: %w", method, err)
				}
				snap.Add(kind, name, fp)
			}
			var next struct {
				NextCursor string `json:"nextCursor"`
			}
			_ = json.Unmarshal(result, &next)
			if next.NextCursor == "" {
				break
			}
			cursor = next.NextCursor
		}
	}
	return snap, nil
}

// taker is one MCP session of Take.
type taker struct {
	ctx     context.Context
	client  *http.Client
	url     string
	session string
	nextID  int
}

// rpcError is a JSON-RPC error a server answered.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// call sends one request and returns its result.
func (t *taker) call(method, params string) (json.RawMessage, error) {
	t.nextID++
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, t.nextID, method, params)
	resp, err := t.post(body)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %s: %w", method, err)
	}
	defer resp.Body.Close()
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		t.session = s
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("snapshot: %s: %w", method, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("snapshot: %s: HTTP %d: %.200s", method, resp.StatusCode, raw)
	}
	msgs := [][]byte{raw}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		d := sse.NewDecoder(maxAnswer)
		events, err := d.Feed(raw)
		if err != nil {
			return nil, fmt.Errorf("snapshot: %s: %w", method, err)
		}
		msgs = msgs[:0]
		for _, ev := range events {
			msgs = append(msgs, bytes.Clone(ev.Data))
		}
		if ev, ok := d.Flush(); ok {
			msgs = append(msgs, bytes.Clone(ev.Data))
		}
	}
	for _, m := range msgs {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if json.Unmarshal(m, &r) != nil || string(r.ID) != fmt.Sprint(t.nextID) {
			continue // a notification, a priming event
		}
		if r.Error != nil {
			return nil, r.Error
		}
		return r.Result, nil
	}
	return nil, fmt.Errorf("snapshot: %s: no answer to the request in %.200q", method, raw)
}

// notify sends a notification.
func (t *taker) notify(method string) error {
	resp, err := t.post(fmt.Sprintf(`{"jsonrpc":"2.0","method":%q}`, method))
	if err != nil {
		return fmt.Errorf("snapshot: %s: %w", method, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	resp.Body.Close()
	return nil
}

// close ends the session (DELETE), if the server made one.
func (t *taker) close() {
	if t.session == "" {
		return
	}
	req, err := http.NewRequestWithContext(t.ctx, http.MethodDelete, t.url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", t.session)
	if resp, err := t.client.Do(req); err == nil {
		resp.Body.Close()
	}
}

func (t *taker) post(body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(t.ctx, http.MethodPost, t.url, bytes.NewBufferString(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if t.session != "" {
		req.Header.Set("Mcp-Session-Id", t.session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return t.client.Do(req)
}
