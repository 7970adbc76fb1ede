package mcpmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

func mustParse(t *testing.T, body string) *Body {
	t.Helper()
	b, err := Parse([]byte(body))
	if err != nil {
		t.Fatalf("Parse(%s): %v", body, err)
	}
	return b
}

func TestReplaceParams(t *testing.T) {
	tests := []struct {
		name string
		body string
		set  map[string][]byte
		want string
	}{
		{
			name: "replace arguments, keep _meta and envelope",
			body: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"op","arguments":{"duration":2},"_meta":{"progressToken":"p-4"}}}`,
			set:  map[string][]byte{"arguments": []byte(`{"duration":1}`)},
			want: `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"op","arguments":{"duration":1},"_meta":{"progressToken":"p-4"}}}`,
		},
		{
			name: "whitespace outside params kept, member bytes kept",
			body: "{ \"id\" : 4 ,\n \"params\" : { \"name\" : \"op\" , \"arguments\" : { } } , \"method\":\"tools/call\", \"jsonrpc\":\"2.0\" }",
			set:  map[string][]byte{"arguments": []byte(`{"x":"y"}`)},
			want: "{ \"id\" : 4 ,\n \"params\" : {\"name\" : \"op\",\"arguments\" : {\"x\":\"y\"}} , \"method\":\"tools/call\", \"jsonrpc\":\"2.0\" }",
		},
		{
			name: "remove and add, new names sorted",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{}}}`,
			set:  map[string][]byte{"arguments": nil, "z": []byte(`1`), "b": []byte(`"x"`)},
			want: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","b":"x","z":1}}`,
		},
		{
			name: "name differing in case is replaced, name included",
			body: `{"jsonrpc":"2.0","id":1,"method":"x","params":{"Arguments":{"a":1}}}`,
			set:  map[string][]byte{"arguments": []byte(`{"a":2}`)},
			want: `{"jsonrpc":"2.0","id":1,"method":"x","params":{"arguments":{"a":2}}}`,
		},
		{
			name: "escaped name matches",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"a"}}`,
			set:  map[string][]byte{"name": []byte(`"b"`)},
			want: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"n\u0061me":"b"}}`,
		},
		{
			name: "message without params gets them",
			body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			set:  map[string][]byte{"_meta": []byte(`{}`)},
			want: `{"jsonrpc":"2.0","method":"notifications/initialized","params":{"_meta":{}}}`,
		},
		{
			name: "remove the only member",
			body: `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1}}`,
			set:  map[string][]byte{"a": nil},
			want: `{"jsonrpc":"2.0","id":1,"method":"x","params":{}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustParse(t, tt.body)
			out, err := ReplaceParams(b.Messages[0], tt.set)
			if err != nil {
				t.Fatalf("ReplaceParams: %v", err)
			}
			if string(out) != tt.want {
				t.Errorf("got  %s\nwant %s", out, tt.want)
			}
			if _, err := Parse(out); err != nil {
				t.Errorf("result does not parse: %v", err)
			}
			// A hand-built message (no recorded offsets) gives the same.
			hand := Message{Raw: []byte(tt.body)}
			out2, err := ReplaceParams(hand, tt.set)
			if err != nil || string(out2) != tt.want {
				t.Errorf("hand-built: got %s, %v", out2, err)
			}
		})
	}
}

func TestReplaceParamsErrors(t *testing.T) {
	obj := mustParse(t, `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1}}`).Messages[0]
	arr := mustParse(t, `{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}`).Messages[0]
	tests := []struct {
		name string
		m    Message
		set  map[string][]byte
		err  error
	}{
		{"invalid value", obj, map[string][]byte{"a": []byte(`{`)}, ErrInvalidValue},
		{"value with duplicate names", obj, map[string][]byte{"a": []byte(`{"x":1,"x":2}`)}, ErrInvalidValue},
		{"value with case duplicate names", obj, map[string][]byte{"a": []byte(`{"x":1,"X":2}`)}, ErrInvalidValue},
		{"value with trailing data", obj, map[string][]byte{"a": []byte(`1 2`)}, ErrInvalidValue},
		{"empty value", obj, map[string][]byte{"a": {}}, ErrInvalidValue},
		{"params array", arr, map[string][]byte{"a": []byte(`1`)}, ErrNotObject},
		{"invalid raw", Message{Raw: []byte(`{"params":`)}, map[string][]byte{"a": []byte(`1`)}, ErrInvalidMessage},
		{"raw not object", Message{Raw: []byte(`[1]`)}, map[string][]byte{"a": []byte(`1`)}, ErrInvalidMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := ReplaceParams(tt.m, tt.set)
			if !errors.Is(err, tt.err) {
				t.Errorf("ReplaceParams = %s, %v; want %v", out, err, tt.err)
			}
		})
	}
}

func TestReplaceParamsStaleView(t *testing.T) {
	// The caller replaced m.Params with other bytes: the rewriter must find
	// the real params in Raw, not trust a stale offset.
	m := mustParse(t, `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1}}`).Messages[0]
	m.Params = []byte(`{"b":2}`)
	out, err := ReplaceParams(m, map[string][]byte{"c": []byte(`3`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":1,"c":3}}`; string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
	// Cleared Params must not lead to a second "params" member.
	m.Params = nil
	out, err = ReplaceParams(m, map[string][]byte{"c": []byte(`3`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(out); err != nil {
		t.Errorf("result %s does not parse: %v", out, err)
	}
}

func TestReplaceResult(t *testing.T) {
	body := `{"result":{"content":[{"type":"text","text":"Echo: hello"}]},"jsonrpc":"2.0","id":3}`
	m := mustParse(t, body).Messages[0]
	out, err := ReplaceResult(m, []byte(`{"content":[{"type":"text","text":"[REDACTED]"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"result":{"content":[{"type":"text","text":"[REDACTED]"}]},"jsonrpc":"2.0","id":3}`
	if string(out) != want {
		t.Errorf("got %s, want %s", out, want)
	}
	if string(m.Raw) != body {
		t.Error("ReplaceResult modified the original")
	}
	if _, err := ReplaceResult(m, []byte(`{"a":1,"a":2}`)); !errors.Is(err, ErrInvalidValue) {
		t.Errorf("duplicate names: err = %v", err)
	}
	e := mustParse(t, `{"jsonrpc":"2.0","id":3,"error":{"code":1,"message":"x"}}`).Messages[0]
	if _, err := ReplaceResult(e, []byte(`{}`)); !errors.Is(err, ErrNoResult) {
		t.Errorf("error response: err = %v, want ErrNoResult", err)
	}
}

func TestJoin(t *testing.T) {
	single := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	batch := "[ {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} ,\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"} ]"
	tests := []struct {
		name     string
		body     string
		replaced map[int][]byte
		want     string
	}{
		{"single unchanged", " " + single + "\n", nil, " " + single + "\n"},
		{"single replaced", single, map[int][]byte{0: []byte(`{"x":1}`)}, `{"x":1}`},
		{"out of range ignored", single, map[int][]byte{5: []byte(`{"x":1}`)}, single},
		{"batch unchanged", batch, nil, batch},
		{"batch second replaced", batch, map[int][]byte{1: []byte(`{"y":2}`)},
			"[ {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} ,\n{\"y\":2} ]"},
		{"batch both replaced", batch, map[int][]byte{0: []byte(`{"x":1}`), 1: []byte(`{"y":2}`)}, "[ {\"x\":1} ,\n{\"y\":2} ]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustParse(t, tt.body)
			if got := Join(b, tt.replaced); string(got) != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	t.Run("no copy when unchanged", func(t *testing.T) {
		b := mustParse(t, batch)
		if got := Join(b, nil); &got[0] != &b.Raw[0] {
			t.Error("Join copied an unchanged body")
		}
	})
	t.Run("hand-built batch", func(t *testing.T) {
		b := &Body{Batch: true, Messages: []Message{{Raw: []byte(`{"a":1}`)}, {Raw: []byte(`{"b":2}`)}}}
		if got := Join(b, map[int][]byte{1: []byte(`{"c":3}`)}); string(got) != `[{"a":1},{"c":3}]` {
			t.Errorf("got %s", got)
		}
	})
	t.Run("messages reordered", func(t *testing.T) {
		b := mustParse(t, batch)
		b.Messages[0], b.Messages[1] = b.Messages[1], b.Messages[0]
		got := Join(b, map[int][]byte{0: []byte(`{"x":1}`)})
		if want := `[{"x":1},{"jsonrpc":"2.0","id":1,"method":"ping"}]`; string(got) != want {
			t.Errorf("got %s, want %s", got, want)
		}
	})
}

func TestErrorResponse(t *testing.T) {
	tests := []struct {
		name    string
		id      []byte
		code    int
		message string
		data    any
		want    string
	}{
		{"number id", []byte(`7`), CodeInvalidParams, "blocked", nil,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"blocked"}}`},
		{"string id and data", []byte(`"a\"b"`), -32000, `say "no" <now>`, map[string]any{"plugin": "deny", "n": 1},
			`{"jsonrpc":"2.0","id":"a\"b","error":{"code":-32000,"message":"say \"no\" <now>","data":{"n":1,"plugin":"deny"}}}`},
		{"nil id", nil, CodeParseError, "bad", nil,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}`},
		{"invalid id", []byte(`{"x":1}`), CodeInternalError, "x", nil,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"x"}}`},
		{"broken id", []byte(`"abc`), CodeInternalError, "x", nil,
			`{"jsonrpc":"2.0","id":null,"error":{"code":-32603,"message":"x"}}`},
		{"raw data", []byte(`1`), 1, "m", json.RawMessage(`[1, 2]`),
			`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m","data":[1,2]}}`},
		{"unmarshalable data dropped", []byte(`1`), 1, "m", make(chan int),
			`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"m"}}`},
		{"invalid UTF-8 message", []byte(`1`), 1, "a\xffb", nil,
			`{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"a` + "\ufffd" + `b"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ErrorResponse(tt.id, tt.code, tt.message, tt.data)
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			b, err := Parse(got)
			if err != nil {
				t.Fatalf("does not parse: %v", err)
			}
			if b.Messages[0].Kind != KindError {
				t.Errorf("kind %v", b.Messages[0].Kind)
			}
		})
	}
}

func TestParamViews(t *testing.T) {
	tests := []struct {
		name   string
		fn     string
		params string
		want   string // name or uri
		args   string
		code   int // 0: success
	}{
		{"tool", "tool", `{"name":"echo","arguments":{"m":"x"}}`, "echo", `{"m":"x"}`, 0},
		{"tool escaped", "tool", ` {"name":"ec\u0068o"} `, "echo", "", 0},
		{"tool empty", "tool", ``, "", "", CodeInvalidParams},
		{"tool null", "tool", `null`, "", "", CodeInvalidParams},
		{"tool array", "tool", `["echo"]`, "", "", CodeInvalidParams},
		{"tool no name", "tool", `{"arguments":{}}`, "", "", CodeInvalidParams},
		{"tool duplicate name", "tool", `{"name":"a","name":"b"}`, "", "", CodeInvalidRequest},
		{"tool case duplicate deep", "tool", `{"name":"a","arguments":{"x":{"k":1,"K":2}}}`, "", "", CodeInvalidRequest},
		{"tool invalid JSON", "tool", `{"name":"a"`, "", "", CodeParseError},
		{"tool trailing", "tool", `{"name":"a"} {}`, "", "", CodeParseError},
		{"prompt", "prompt", `{"name":"p","arguments":{"city":"Paris"}}`, "p", `{"city":"Paris"}`, 0},
		{"prompt non-string arg", "prompt", `{"name":"p","arguments":{"n":1}}`, "", "", CodeInvalidParams},
		{"resource", "resource", `{"uri":"a://b","_meta":{}}`, "a://b", "", 0},
		{"resource uri null", "resource", `{"uri":null}`, "", "", CodeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				name string
				args []byte
				err  error
			)
			switch tt.fn {
			case "tool":
				name, args, err = ToolCall([]byte(tt.params))
			case "prompt":
				name, args, err = PromptGet([]byte(tt.params))
			case "resource":
				name, err = ResourceRead([]byte(tt.params))
			}
			if tt.code != 0 {
				var e *Error
				if !errors.As(err, &e) || e.Code != tt.code {
					t.Fatalf("err = %v, want code %d", err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if name != tt.want || string(args) != tt.args || (tt.args == "") != (args == nil) {
				t.Errorf("got %q %q, want %q %q", name, args, tt.want, tt.args)
			}
		})
	}
}

func TestErrorIs(t *testing.T) {
	_, err := Parse([]byte(`[]`))
	var e *Error
	if !errors.As(err, &e) || e.Code != CodeInvalidRequest {
		t.Fatalf("err = %v", err)
	}
	if !bytes.Contains([]byte(err.Error()), []byte("-32600")) {
		t.Errorf("Error() = %q lacks the code", err.Error())
	}
}

func TestResultSpan(t *testing.T) {
	b, err := Parse([]byte(`[{"jsonrpc":"2.0","id":1,"result":{"a":[1]}} , {"jsonrpc":"2.0","id":2,"result": 5 }]`))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{`{"a":[1]}`, `5`} {
		m := b.Messages[i]
		start, end, ok := m.ResultSpan()
		if !ok || string(m.Raw[start:end]) != want {
			t.Errorf("message %d: ResultSpan = %d, %d, %v; want the span of %s", i, start, end, ok, want)
		}
	}
	m := b.Messages[0]
	m.Result = []byte(`{"a":[1]}`) // the same bytes, elsewhere
	if _, _, ok := m.ResultSpan(); ok {
		t.Error("ResultSpan of a result that is not part of Raw: ok")
	}
	for _, raw := range []string{`{"jsonrpc":"2.0","method":"ping"}`, `{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"x"}}`} {
		b, err := Parse([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, ok := b.Messages[0].ResultSpan(); ok {
			t.Errorf("ResultSpan of %s: ok", raw)
		}
	}
}
