package bench

import (
	"bufio"
	"bytes"
	"embed"
	"fmt"
	"maps"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
)

// The recorded responses of pkg/sse/testdata/fixtures (a real MCP server,
// @modelcontextprotocol/server-everything): tools/list (one ~7.7 KiB SSE
// event, with content-length) and tools/call echo (one SSE event).
//
//go:embed testdata/tools-list.http testdata/tools-call-echo.http
var recorded embed.FS

// Request bodies as an MCP client sends them (the ids match the recorded
// responses).
const (
	toolsListBody = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	toolsCallBody = `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}`
)

// mcpRequestHeaders are the headers Envoy sends for an MCP POST: the
// client's (Streamable HTTP), plus x-request-id and x-forwarded-proto,
// which Envoy adds.
func mcpRequestHeaders(bodyLen int) []Header {
	return []Header{
		{":authority", "mcp.example.com"},
		{":path", "/mcp"},
		{":method", "POST"},
		{":scheme", "http"},
		{"accept", "application/json, text/event-stream"},
		{"content-length", strconv.Itoa(bodyLen)},
		{"content-type", "application/json"},
		{"mcp-protocol-version", "2025-11-25"},
		{"mcp-session-id", "3498f650-c053-408a-a2d1-282f8907d0c8"},
		{"user-agent", "node"},
		{"x-forwarded-proto", "http"},
		{"x-request-id", "0b6c7f0e-8c1e-4b7a-9d55-3f1f6c2f9a10"},
	}
}

// recordedResponse reads a recorded HTTP/1.1 response: its headers as Envoy
// forwards them (lower-case, hop-by-hop ones dropped, :status first) and
// its body.
func recordedResponse(name string) ([]Header, []byte, error) {
	raw, err := recorded.ReadFile("testdata/" + name)
	if err != nil {
		return nil, nil, err
	}
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(raw)))
	line, err := r.ReadLine()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: status line: %w", name, err)
	}
	_, code, ok := strings.Cut(line, " ")
	if !ok || len(code) < 3 {
		return nil, nil, fmt.Errorf("%s: bad status line %q", name, line)
	}
	hdr, err := r.ReadMIMEHeader()
	if err != nil {
		return nil, nil, fmt.Errorf("%s: headers: %w", name, err)
	}
	hs := []Header{{":status", code[:3]}}
	for _, k := range slices.Sorted(maps.Keys(hdr)) {
		lk := strings.ToLower(k)
		switch lk {
		case "connection", "keep-alive", "transfer-encoding":
			continue
		}
		for _, v := range hdr[k] {
			hs = append(hs, Header{lk, v})
		}
	}
	_, body, _ := bytes.Cut(raw, []byte("\r\n\r\n"))
	return hs, body, nil
}

// ToolsList is a tools/list request and the recorded tools/list response.
func ToolsList() (*Exchange, error) {
	hs, body, err := recordedResponse("tools-list.http")
	if err != nil {
		return nil, err
	}
	return &Exchange{
		RequestHeaders: mcpRequestHeaders(len(toolsListBody)), RequestBody: []byte(toolsListBody),
		ResponseHeaders: hs, ResponseBody: [][]byte{body},
	}, nil
}

// ToolsCall is a tools/call of the echo tool and the recorded response.
func ToolsCall() (*Exchange, error) {
	hs, body, err := recordedResponse("tools-call-echo.http")
	if err != nil {
		return nil, err
	}
	return &Exchange{
		RequestHeaders: mcpRequestHeaders(len(toolsCallBody)), RequestBody: []byte(toolsCallBody),
		ResponseHeaders: hs, ResponseBody: [][]byte{body},
	}, nil
}

// ToolsCallWithArgs is [ToolsCall] with an echo message of n bytes, to see
// whether the cost of a request no plugin applies to grows with its size.
func ToolsCallWithArgs(n int) (*Exchange, error) {
	x, err := ToolsCall()
	if err != nil {
		return nil, err
	}
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` +
		strings.Repeat("m", n) + `"}}}`
	x.RequestBody = []byte(body)
	x.RequestHeaders = mcpRequestHeaders(len(body))
	return x, nil
}

// ToolsList2026 is [ToolsList] sent by a client speaking MCP 2026-07-28,
// which names the method in a header (Mcp-Method) so that a server, or this
// sidecar, can decide at request-headers time.
func ToolsList2026() (*Exchange, error) {
	x, err := ToolsList()
	if err != nil {
		return nil, err
	}
	x.RequestHeaders = with2026Headers(x.RequestHeaders, Header{"mcp-method", "tools/list"})
	return x, nil
}

// with2026Headers turns the request headers of an MCP 2025-11-25 client
// into those of a 2026-07-28 one: the version, and the standard headers
// std (Mcp-Method, Mcp-Name) before it.
func with2026Headers(hs []Header, std ...Header) []Header {
	out := make([]Header, 0, len(hs)+len(std))
	for _, h := range hs {
		if h.Key == "mcp-protocol-version" {
			out = append(append(out, std...), Header{h.Key, "2026-07-28"})
			continue
		}
		out = append(out, h)
	}
	return out
}

// GetSSE is the GET a Streamable HTTP client opens to receive server
// messages (no Last-Event-ID: not a resumption), answered with an SSE
// stream of n ~1 KiB notifications in 4 KiB chunks.
func GetSSE(n int) *Exchange {
	var body []byte
	pad := strings.Repeat("z", 900)
	for i := range n {
		body = append(body, sseEvent(fmt.Sprintf(
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"%d %s"}}`, i, pad))...)
	}
	var chunks [][]byte
	for len(body) > 0 {
		c := min(4<<10, len(body))
		chunks = append(chunks, body[:c:c])
		body = body[c:]
	}
	return &Exchange{
		RequestHeaders: []Header{
			{":authority", "mcp.example.com"},
			{":path", "/mcp"},
			{":method", "GET"},
			{":scheme", "http"},
			{"accept", "text/event-stream"},
			{"mcp-protocol-version", "2025-11-25"},
			{"mcp-session-id", "3498f650-c053-408a-a2d1-282f8907d0c8"},
			{"user-agent", "node"},
			{"x-forwarded-proto", "http"},
			{"x-request-id", "0b6c7f0e-8c1e-4b7a-9d55-3f1f6c2f9a10"},
		},
		ResponseHeaders: sseResponseHeaders(),
		ResponseBody:    chunks,
	}
}

// SSE stream shapes for [StreamedToolsCall].
const (
	// ManyEvents: ~1 KiB notifications/progress events, then the result.
	ManyEvents = "many-events"
	// OneEvent: the whole stream is one result event.
	OneEvent = "one-event"
)

// StreamedToolsCall is a tools/call of echo answered with an SSE stream of
// size bytes (within a few hundred bytes) of the given shape, delivered in
// chunks of chunk bytes cut without regard to event boundaries. The last
// event is the tools/call result (id 3), returned as result (the JSON-RPC
// result object a post hook sees).
func StreamedToolsCall(shape string, size, chunk int) (x *Exchange, result []byte, err error) {
	var body []byte
	switch shape {
	case ManyEvents:
		result = []byte(`{"content":[{"type":"text","text":"done"}]}`)
		last := sseEvent(`{"jsonrpc":"2.0","id":3,"result":` + string(result) + `}`)
		pad := strings.Repeat("x", 900)
		for i := 0; len(body)+len(last) < size; i++ {
			body = append(body, sseEvent(fmt.Sprintf(
				`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p-3","progress":%d,"message":"%s"}}`, i, pad))...)
		}
		body = append(body, last...)
	case OneEvent:
		const head, mid, tail = `{"jsonrpc":"2.0","id":3,"result":`, `{"content":[{"type":"text","text":"`, `"}]}`
		n := size - len(head) - len(mid) - len(tail) - len("}") - len("event: message\ndata: \n\n")
		result = []byte(mid + strings.Repeat("y", max(n, 0)) + tail)
		body = sseEvent(head + string(result) + "}")
	default:
		return nil, nil, fmt.Errorf("unknown SSE shape %q", shape)
	}
	var chunks [][]byte
	for len(body) > 0 {
		n := min(chunk, len(body))
		chunks = append(chunks, body[:n:n])
		body = body[n:]
	}
	return &Exchange{
		RequestHeaders: mcpRequestHeaders(len(toolsCallBody)), RequestBody: []byte(toolsCallBody),
		ResponseHeaders: sseResponseHeaders(),
		ResponseBody:    chunks,
	}, result, nil
}

// sseResponseHeaders are the response headers of an MCP server's SSE
// stream.
func sseResponseHeaders() []Header {
	return []Header{
		{":status", "200"},
		{"cache-control", "no-cache, no-transform"},
		{"content-type", "text/event-stream"},
		{"mcp-session-id", "3498f650-c053-408a-a2d1-282f8907d0c8"},
	}
}

func sseEvent(data string) []byte {
	return []byte("event: message\ndata: " + data + "\n\n")
}

// ReplayGET is a GET that resumes the stream of the tools/call of
// [ToolsCall] (Last-Event-ID, MCP 2025-11-25), answered with the call's
// result replayed as an SSE event.
func ReplayGET() *Exchange {
	x := GetSSE(0)
	x.RequestHeaders = append(x.RequestHeaders, Header{"last-event-id", "0_0"})
	x.ResponseBody = [][]byte{[]byte("id: 0_1\nevent: message\ndata: " +
		`{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"Echo: hello"}]}}` + "\n\n")}
	return x
}
