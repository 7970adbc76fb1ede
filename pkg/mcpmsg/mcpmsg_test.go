package mcpmsg

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// req builds a tools/call request with the given params JSON.
func toolsCall(params string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + params + `}`
}

func TestParseRejects(t *testing.T) {
	deep := strings.Repeat(`[`, MaxDepth) + strings.Repeat(`]`, MaxDepth)
	tests := []struct {
		name string
		body string
		code int
	}{
		// A request id a server would answer as another value (id.go).
		{"fractional id", `{"jsonrpc":"2.0","id":3.0,"method":"tools/list"}`, CodeInvalidRequest},
		{"exponent id", `{"jsonrpc":"2.0","id":3e0,"method":"tools/list"}`, CodeInvalidRequest},
		{"scaled exponent id", `{"jsonrpc":"2.0","id":30e-1,"method":"tools/list"}`, CodeInvalidRequest},
		{"minus zero id", `{"jsonrpc":"2.0","id":-0,"method":"ping"}`, CodeInvalidRequest},
		{"unsafe integer id", `{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}`, CodeInvalidRequest},
		{"unsafe id in batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":1E1,"method":"ping"}]`, CodeInvalidRequest},
		// Not JSON, or not the one JSON text a server would see.
		{"empty", ``, CodeParseError},
		{"whitespace only", " \r\n\t", CodeParseError},
		{"BOM", "\xef\xbb\xbf" + `{"jsonrpc":"2.0","id":1,"method":"ping"}`, CodeParseError},
		{"trailing garbage", `{"jsonrpc":"2.0","id":1,"method":"ping"} x`, CodeParseError},
		{"two values", `{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}`, CodeParseError},
		{"trailing comma object", `{"jsonrpc":"2.0","id":1,"method":"ping",}`, CodeParseError},
		{"trailing comma batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"},]`, CodeParseError},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"ping"`, CodeParseError},
		{"invalid UTF-8 in string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"a\xff\"}}", CodeParseError},
		{"overlong UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools\xc0\xafcall\"}", CodeParseError},
		{"invalid UTF-8 outside string", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\xff", CodeParseError},
		{"lone surrogate escape", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\ud800"}}`, CodeParseError},
		{"raw control char", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\x00\"}", CodeParseError},
		{"single quotes", `{'jsonrpc':'2.0','id':1,'method':'ping'}`, CodeParseError},
		{"comment", `{"jsonrpc":"2.0",/**/"id":1,"method":"ping"}`, CodeParseError},
		{"NaN", `{"jsonrpc":"2.0","id":NaN,"method":"ping"}`, CodeParseError},
		{"leading zero", `{"jsonrpc":"2.0","id":01,"method":"ping"}`, CodeParseError},

		// Duplicate names: servers differ on which one wins.
		{"duplicate method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"x"}}`, CodeInvalidRequest},
		{"duplicate method escaped", `{"jsonrpc":"2.0","id":1,"method":"tools/list","m\u0065thod":"tools/call","params":{"name":"x"}}`, CodeInvalidRequest},
		{"duplicate params", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}`, CodeInvalidRequest},
		{"duplicate id", `{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`, CodeInvalidRequest},
		{"duplicate jsonrpc", `{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}`, CodeInvalidRequest},
		{"duplicate name", toolsCall(`{"name":"safe","name":"rm"}`), CodeInvalidRequest},
		{"duplicate name escaped", toolsCall(`{"name":"safe","\u006eame":"rm"}`), CodeInvalidRequest},
		{"duplicate arguments", toolsCall(`{"name":"x","arguments":{"a":1},"arguments":{"a":2}}`), CodeInvalidRequest},
		{"duplicate uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a://x","uri":"a://y"}}`, CodeInvalidRequest},
		{"duplicate prompt name", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a","name":"b"}}`, CodeInvalidRequest},
		{"duplicate deep in arguments", toolsCall(`{"name":"x","arguments":{"cmd":{"argv":[{"a":1,"a":2}]}}}`), CodeInvalidRequest},
		{"duplicate in _meta", toolsCall(`{"name":"x","_meta":{"progressToken":1,"progressToken":2}}`), CodeInvalidRequest},
		{"duplicate in result", `{"jsonrpc":"2.0","id":1,"result":{"content":[],"content":[{"type":"text","text":"x"}]}}`, CodeInvalidRequest},
		{"duplicate in second batch element", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/list","method":"tools/call","params":{"name":"x"}}]`, CodeInvalidRequest},
		// Names equal ignoring case: Go's encoding/json v1 and .NET match them.
		{"case duplicate method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call"}`, CodeInvalidRequest},
		{"case duplicate arguments", toolsCall(`{"name":"x","arguments":{"cmd":"ls"},"Arguments":{"cmd":"rm"}}`), CodeInvalidRequest},
		{"case duplicate deep", toolsCall(`{"name":"x","arguments":{"command":"ls","COMMAND":"rm -rf /"}}`), CodeInvalidRequest},
		{"kelvin sign duplicate", toolsCall(`{"name":"x","arguments":{"kind":"a","\u212aind":"b"}}`), CodeInvalidRequest},
		{"long s duplicate", toolsCall(`{"name":"x","arguments":{"mode":"a"},"argument\u017f":{"mode":"b"}}`), CodeInvalidRequest},
		{"case variant method alone", `{"jsonrpc":"2.0","id":1,"METHOD":"tools/call","method":"ping"}`, CodeInvalidRequest},
		{"case variant params alone", `{"jsonrpc":"2.0","id":1,"method":"ping","Params":{}}`, CodeInvalidRequest},
		{"case variant id alone", `{"jsonrpc":"2.0","Id":1,"method":"ping"}`, CodeInvalidRequest},
		{"case variant result", `{"jsonrpc":"2.0","id":1,"result":{},"Error":{}}`, CodeInvalidRequest},
		{"method with NUL", `{"jsonrpc":"2.0","id":1,"method":"tools/call\u0000x"}`, CodeInvalidRequest},
		{"method with newline", `{"jsonrpc":"2.0","id":1,"method":"tools/call\n"}`, CodeInvalidRequest},
		{"case variant arguments alone", toolsCall(`{"name":"x","ARGUMENTS":{"cmd":"rm"}}`), CodeInvalidParams},
		{"case duplicate prompt name", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"a","arguments":{},"Name":"b"}}`, CodeInvalidRequest},
		{"case variant uri alone", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"a://x","URI":"b://y"}}`, CodeInvalidRequest},
		{"case variant uri without uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"Uri":"b://y"}}`, CodeInvalidParams},
		{"case duplicate many names", toolsCall(`{"name":"x","arguments":{` + manyNames(100) + `,"K99":0}}`), CodeInvalidRequest},

		// Not an object or a non-empty array of objects.
		{"null", `null`, CodeInvalidRequest},
		{"number", `1`, CodeInvalidRequest},
		{"string", `"tools/call"`, CodeInvalidRequest},
		{"true", `true`, CodeInvalidRequest},
		{"empty batch", `[]`, CodeInvalidRequest},
		{"empty batch spaces", ` [ ] `, CodeInvalidRequest},
		{"batch of number", `[1]`, CodeInvalidRequest},
		{"batch with number", `[{"jsonrpc":"2.0","id":1,"method":"ping"},2]`, CodeInvalidRequest},
		{"nested batch", `[[{"jsonrpc":"2.0","id":1,"method":"ping"}]]`, CodeInvalidRequest},
		{"batch with invalid element", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2}]`, CodeInvalidRequest},
		{"batch hiding a bad tools/call", `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":1}}]`, CodeInvalidParams},

		// Envelope.
		{"no jsonrpc", `{"id":1,"method":"ping"}`, CodeInvalidRequest},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, CodeInvalidRequest},
		{"jsonrpc number", `{"jsonrpc":2.0,"id":1,"method":"ping"}`, CodeInvalidRequest},
		{"method number", `{"jsonrpc":"2.0","id":1,"method":1}`, CodeInvalidRequest},
		{"method null", `{"jsonrpc":"2.0","id":1,"method":null}`, CodeInvalidRequest},
		{"id object", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, CodeInvalidRequest},
		{"id array", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, CodeInvalidRequest},
		{"id bool", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, CodeInvalidRequest},
		{"request id null", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, CodeInvalidRequest},
		{"params string", `{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}`, CodeInvalidRequest},
		{"params null", `{"jsonrpc":"2.0","id":1,"method":"ping","params":null}`, CodeInvalidRequest},
		{"params number", `{"jsonrpc":"2.0","id":1,"method":"ping","params":1}`, CodeInvalidRequest},
		{"method and result", `{"jsonrpc":"2.0","id":1,"method":"ping","result":{}}`, CodeInvalidRequest},
		{"result and error", `{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`, CodeInvalidRequest},
		{"nothing", `{"jsonrpc":"2.0","id":1}`, CodeInvalidRequest},
		{"empty object", `{}`, CodeInvalidRequest},
		{"error not object", `{"jsonrpc":"2.0","id":1,"error":"boom"}`, CodeInvalidRequest},
		{"response without id", `{"jsonrpc":"2.0","result":{}}`, CodeInvalidRequest},
		{"response id null", `{"jsonrpc":"2.0","id":null,"result":{}}`, CodeInvalidRequest},
		{"tools/call notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}`, CodeInvalidRequest},
		{"prompts/get notification", `{"jsonrpc":"2.0","method":"prompts/get","params":{"name":"x"}}`, CodeInvalidRequest},
		{"resources/read notification", `{"jsonrpc":"2.0","method":"resources/read","params":{"uri":"x"}}`, CodeInvalidRequest},
		{"too deep", `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + deep + `}`, CodeInvalidRequest},

		// Params of the hooked methods.
		{"tools/call no params", `{"jsonrpc":"2.0","id":1,"method":"tools/call"}`, CodeInvalidParams},
		{"tools/call escaped no params", `{"jsonrpc":"2.0","id":1,"method":"tools\u002fcall"}`, CodeInvalidParams},
		{"tools/call params array", toolsCall(`["x"]`), CodeInvalidParams},
		{"tools/call no name", toolsCall(`{"arguments":{}}`), CodeInvalidParams},
		{"tools/call name number", toolsCall(`{"name":1}`), CodeInvalidParams},
		{"tools/call name null", toolsCall(`{"name":null}`), CodeInvalidParams},
		{"tools/call name object", toolsCall(`{"name":{"a":"b"}}`), CodeInvalidParams},
		{"tools/call arguments string", toolsCall(`{"name":"x","arguments":"{}"}`), CodeInvalidParams},
		{"tools/call arguments array", toolsCall(`{"name":"x","arguments":[]}`), CodeInvalidParams},
		{"tools/call arguments null", toolsCall(`{"name":"x","arguments":null}`), CodeInvalidParams},
		{"prompts/get no params", `{"jsonrpc":"2.0","id":1,"method":"prompts/get"}`, CodeInvalidParams},
		{"prompts/get name number", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":2}}`, CodeInvalidParams},
		{"prompts/get arguments array", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":[]}}`, CodeInvalidParams},
		{"prompts/get argument number", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"city":1}}}`, CodeInvalidParams},
		{"prompts/get argument object", `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"p","arguments":{"city":{"x":"y"}}}}`, CodeInvalidParams},
		{"resources/read no params", `{"jsonrpc":"2.0","id":1,"method":"resources/read"}`, CodeInvalidParams},
		{"resources/read no uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"url":"a://x"}}`, CodeInvalidParams},
		{"resources/read uri number", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":1}}`, CodeInvalidParams},
		{"resources/read params array", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":["a://x"]}`, CodeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Parse([]byte(tt.body))
			if err == nil {
				t.Fatalf("Parse accepted %q: %+v", tt.body, b.Messages)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			if e.Code != tt.code {
				t.Errorf("code = %d (%s), want %d", e.Code, e.Message, tt.code)
			}
			if e.Message == "" {
				t.Error("empty message")
			}
		})
	}
}

// manyNames returns n members "k0":0,… (enough to switch to the map).
func manyNames(n int) string {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"k`)
		sb.WriteString(itoa(i))
		sb.WriteString(`":0`)
	}
	return sb.String()
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

// want is the comparable part of a Message.
type want struct {
	Kind                                Kind
	ID, Method, Params, Result, Error   string
	Name, Arguments, URI                string
	HasID, HasParams, HasResult, HasErr bool
}

func got(m Message) want {
	return want{
		Kind: m.Kind, ID: string(m.ID), Method: m.Method, Params: string(m.Params),
		Result: string(m.Result), Error: string(m.Error),
		Name: m.Name, Arguments: string(m.Arguments), URI: m.URI,
		HasID: m.ID != nil, HasParams: m.Params != nil, HasResult: m.Result != nil, HasErr: m.Error != nil,
	}
}

func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		batch bool
		want  []want
	}{
		{
			name: "escaped method is tools/call",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools\u002fcall","params":{"name":"e\u0063ho","arguments":{"m":"x"}}}`,
			want: []want{{Kind: KindRequest, ID: `1`, Method: "tools/call", Params: `{"name":"e\u0063ho","arguments":{"m":"x"}}`,
				Name: "echo", Arguments: `{"m":"x"}`, HasID: true, HasParams: true}},
		},
		{
			name: "escaped jsonrpc and whitespace",
			body: " \n{ \"jsonrpc\" : \"2\\u002e0\" , \"id\" : \"a\" , \"method\" : \"ping\" }\r\n",
			want: []want{{Kind: KindRequest, ID: `"a"`, Method: "ping", HasID: true}},
		},
		{
			name: "method compared exactly",
			body: `{"jsonrpc":"2.0","id":1,"method":"Tools/Call","params":{"name":1}}`,
			want: []want{{Kind: KindRequest, ID: `1`, Method: "Tools/Call", Params: `{"name":1}`, HasID: true, HasParams: true}},
		},
		{
			name: "tools/call without arguments, unknown members kept",
			body: `{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"t","_meta":{"progressToken":"p"}},"extra":[1]}`,
			want: []want{{Kind: KindRequest, ID: `"x"`, Method: "tools/call", Params: `{"name":"t","_meta":{"progressToken":"p"}}`,
				Name: "t", HasID: true, HasParams: true}},
		},
		{
			name: "prompts/get",
			body: `{"jsonrpc":"2.0","id":2,"method":"prompts/get","params":{"name":"p","arguments":{"city":"Paris"}}}`,
			want: []want{{Kind: KindRequest, ID: `2`, Method: "prompts/get", Params: `{"name":"p","arguments":{"city":"Paris"}}`,
				Name: "p", Arguments: `{"city":"Paris"}`, HasID: true, HasParams: true}},
		},
		{
			name: "resources/read escaped uri",
			body: `{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"file:\/\/\/etc\/passwd"}}`,
			want: []want{{Kind: KindRequest, ID: `3`, Method: "resources/read", Params: `{"uri":"file:\/\/\/etc\/passwd"}`,
				URI: "file:///etc/passwd", HasID: true, HasParams: true}},
		},
		{
			name: "notification with array params",
			body: `{"jsonrpc":"2.0","method":"custom","params":[1,2]}`,
			want: []want{{Kind: KindNotification, Method: "custom", Params: `[1,2]`, HasParams: true}},
		},
		{
			name: "response",
			body: `{"result":{"content":[]},"jsonrpc":"2.0","id":7}`,
			want: []want{{Kind: KindResponse, ID: `7`, Result: `{"content":[]}`, HasID: true, HasResult: true}},
		},
		{
			name: "null result",
			body: `{"jsonrpc":"2.0","id":7,"result":null}`,
			want: []want{{Kind: KindResponse, ID: `7`, Result: `null`, HasID: true, HasResult: true}},
		},
		{
			name: "error response with null id",
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}`,
			want: []want{{Kind: KindError, ID: `null`, Error: `{"code":-32700,"message":"x"}`, HasID: true, HasErr: true}},
		},
		{
			name: "error response without id",
			body: `{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request"}}`,
			want: []want{{Kind: KindError, Error: `{"code":-32000,"message":"Bad Request"}`, HasErr: true}},
		},
		{
			name:  "negative, largest safe and empty-string ids; a response's id as written",
			body:  `[{"jsonrpc":"2.0","id":-15,"method":"ping"},{"jsonrpc":"2.0","id":9007199254740991,"method":"ping"},{"jsonrpc":"2.0","id":"","method":"ping"},{"jsonrpc":"2.0","id":-1.5e3,"result":{}}]`,
			batch: true,
			want: []want{
				{Kind: KindRequest, ID: `-15`, Method: "ping", HasID: true},
				{Kind: KindRequest, ID: `9007199254740991`, Method: "ping", HasID: true},
				{Kind: KindRequest, ID: `""`, Method: "ping", HasID: true},
				{Kind: KindResponse, ID: `-1.5e3`, Result: `{}`, HasID: true, HasResult: true},
			},
		},
		{
			name:  "batch of one with whitespace",
			body:  "[ {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"} ]",
			batch: true,
			want:  []want{{Kind: KindNotification, Method: "notifications/initialized"}},
		},
		{
			name: "names differing beyond case are fine",
			body: toolsCall(`{"name":"x","arguments":{"a":1,"b":2,"ab":3,"ä":4,"é":5,"e":6,"":7}}`),
			want: []want{{Kind: KindRequest, ID: `1`, Method: "tools/call", Params: `{"name":"x","arguments":{"a":1,"b":2,"ab":3,"ä":4,"é":5,"e":6,"":7}}`,
				Name: "x", Arguments: `{"a":1,"b":2,"ab":3,"ä":4,"é":5,"e":6,"":7}`, HasID: true, HasParams: true}},
		},
		{
			name: "same name in different objects",
			body: toolsCall(`{"name":"x","arguments":{"name":{"name":"y"},"list":[{"name":1},{"name":2}]}}`),
			want: []want{{Kind: KindRequest, ID: `1`, Method: "tools/call", Params: `{"name":"x","arguments":{"name":{"name":"y"},"list":[{"name":1},{"name":2}]}}`,
				Name: "x", Arguments: `{"name":{"name":"y"},"list":[{"name":1},{"name":2}]}`, HasID: true, HasParams: true}},
		},
		{
			name: "many distinct names",
			body: toolsCall(`{"name":"x","arguments":{` + manyNames(200) + `}}`),
			want: []want{{Kind: KindRequest, ID: `1`, Method: "tools/call", Params: `{"name":"x","arguments":{` + manyNames(200) + `}}`,
				Name: "x", Arguments: `{` + manyNames(200) + `}`, HasID: true, HasParams: true}},
		},
		{
			name: "deep but within the limit",
			body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":` + strings.Repeat(`[`, MaxDepth-1) + strings.Repeat(`]`, MaxDepth-1) + `}`,
			want: []want{{Kind: KindRequest, ID: `1`, Method: "ping", Params: strings.Repeat(`[`, MaxDepth-1) + strings.Repeat(`]`, MaxDepth-1),
				HasID: true, HasParams: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := Parse([]byte(tt.body))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if b.Batch != tt.batch {
				t.Errorf("Batch = %v, want %v", b.Batch, tt.batch)
			}
			var gotMsgs []want
			for _, m := range b.Messages {
				gotMsgs = append(gotMsgs, got(m))
				if !bytes.Contains([]byte(tt.body), m.Raw) {
					t.Errorf("Raw %q is not part of the body", m.Raw)
				}
			}
			if diff := cmp.Diff(tt.want, gotMsgs); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if j := Join(b, nil); !bytes.Equal(j, []byte(tt.body)) {
				t.Errorf("Join = %q, want the body", j)
			}
		})
	}
}

func readDir(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures in testdata/%s: %v", dir, err)
	}
	out := make(map[string][]byte, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = b
	}
	return out
}

func TestParseFixtureRequests(t *testing.T) {
	type w struct {
		kind   Kind
		method string
		name   string
		uri    string
		batch  int
	}
	wants := map[string]w{
		"initialize":               {kind: KindRequest, method: "initialize"},
		"initialized-notification": {kind: KindNotification, method: "notifications/initialized"},
		"tools-list":               {kind: KindRequest, method: "tools/list"},
		"tools-call-echo":          {kind: KindRequest, method: "tools/call", name: "echo"},
		"tools-call-progress":      {kind: KindRequest, method: "tools/call", name: "trigger-long-running-operation"},
		"tools-call-unknown":       {kind: KindRequest, method: "tools/call", name: "no-such-tool"},
		"prompts-list":             {kind: KindRequest, method: "prompts/list"},
		"prompts-get":              {kind: KindRequest, method: "prompts/get", name: "args-prompt"},
		"resources-list":           {kind: KindRequest, method: "resources/list"},
		"resources-read":           {kind: KindRequest, method: "resources/read", uri: "demo://resource/static/document/architecture.md"},
		"batch":                    {kind: KindRequest, method: "tools/list", batch: 2},
	}
	for name, body := range readDir(t, "requests") {
		t.Run(name, func(t *testing.T) {
			want, ok := wants[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			b, err := Parse(body)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if want.batch > 0 != b.Batch || (want.batch > 0 && len(b.Messages) != want.batch) {
				t.Fatalf("batch = %v with %d messages, want %d", b.Batch, len(b.Messages), want.batch)
			}
			m := b.Messages[0]
			if m.Kind != want.kind || m.Method != want.method || m.Name != want.name || m.URI != want.uri {
				t.Errorf("got %v %q name %q uri %q, want %+v", m.Kind, m.Method, m.Name, m.URI, want)
			}
			for _, m := range b.Messages {
				if m.Method != MethodToolsCall {
					continue
				}
				name, args, err := ToolCall(m.Params)
				if err != nil || name != m.Name || !bytes.Equal(args, m.Arguments) {
					t.Errorf("ToolCall = %q, %s, %v; Parse saw %q, %s", name, args, err, m.Name, m.Arguments)
				}
			}
		})
	}
}

func TestParseFixtureResponses(t *testing.T) {
	for name, body := range readDir(t, "responses") {
		t.Run(name, func(t *testing.T) {
			b, err := Parse(body)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if b.Batch || len(b.Messages) != 1 {
				t.Fatalf("got batch %v with %d messages", b.Batch, len(b.Messages))
			}
			m := b.Messages[0]
			switch {
			case strings.HasPrefix(name, "stale-session"):
				// The server's -32000 error has no id at all.
				if m.Kind != KindError || m.ID != nil || !bytes.Contains(m.Error, []byte("-32000")) {
					t.Errorf("got %+v, want an error without id", got(m))
				}
			case strings.HasPrefix(name, "tools-call-progress.") && name != "tools-call-progress.5":
				if m.Kind != KindNotification || m.Method != "notifications/progress" {
					t.Errorf("got %v %q, want a progress notification", m.Kind, m.Method)
				}
			default:
				if m.Kind != KindResponse || len(m.Result) == 0 || m.ID == nil {
					t.Errorf("got %+v, want a response", got(m))
				}
			}
		})
	}
}
