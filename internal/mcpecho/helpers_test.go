package mcpecho

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/pkg/sse"
)

// event is one SSE event, copied out of the decoder.
type event struct {
	ID, Type, Data string
	HasData        bool
}

// reply is a raw HTTP answer.
type reply struct {
	Status int
	Header http.Header
	Body   []byte
	Events []event
}

// do sends one request to srv and reads the whole answer (SSE decoded).
func do(t *testing.T, srv *httptest.Server, method string, header map[string]string, body string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+"/mcp", rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json, text/event-stream")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: read: %v", method, err)
	}
	r := reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var d sse.Decoder
		evs, err := d.Feed(b)
		if err != nil {
			t.Fatalf("sse: %v", err)
		}
		for _, e := range evs {
			r.Events = append(r.Events, event{ID: string(e.ID), Type: string(e.Type), Data: string(e.Data), HasData: len(bytes.TrimSpace(e.Data)) > 0})
		}
	}
	return r
}

// message is the part of a JSON-RPC message the tests look at.
type message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func decode(t *testing.T, data []byte) message {
	t.Helper()
	var m message
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("decode %q: %v", data, err)
	}
	return m
}

// responses returns the JSON-RPC responses among events, by id.
func responses(t *testing.T, evs []event) map[string]message {
	t.Helper()
	out := map[string]message{}
	for _, e := range evs {
		if !e.HasData {
			continue
		}
		if m := decode(t, []byte(e.Data)); m.Method == "" && len(m.ID) > 0 {
			out[string(m.ID)] = m
		}
	}
	return out
}
