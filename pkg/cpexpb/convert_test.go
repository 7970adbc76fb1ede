package cpexpb

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

func TestJSONRoundTrip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{}`},
		{`{"a":1}`, `{"a":1}`},
		{`{"n":3.0,"f":1.5,"big":1e21,"small":1e-7,"neg":-2}`, `{"n":3,"f":1.5,"big":1e+21,"small":1e-7,"neg":-2}`},
		{`{"s":"é\"\n<","b":true,"z":null,"l":[1,"x",[],{}]}`, `{"s":"é\"\n<","b":true,"z":null,"l":[1,"x",[],{}]}`},
		{` {"nested":{"deep":{"x":[false]}}} `, `{"nested":{"deep":{"x":[false]}}}`},
	} {
		s, err := StructFromJSON([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		out, err := StructToJSON(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		var got, want any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: output %s: %v", tc.in, out, err)
		}
		_ = json.Unmarshal([]byte(tc.want), &want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: -want +got\n%s", tc.in, diff)
		}
		if bytes.Contains(out, []byte("3.0")) || bytes.Contains(out, []byte("e+00")) {
			t.Errorf("%s: whole numbers must print as integers: %s", tc.in, out)
		}
	}
}

func TestStructFromJSONErrors(t *testing.T) {
	for _, in := range []string{`[1]`, `"x"`, `{"a":}`, `{"a":1} {}`, `{"a":1e999}`, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}"} {
		if s, err := StructFromJSON([]byte(in)); err == nil {
			t.Errorf("%q: want an error, got %v", in, s)
		}
	}
	for _, in := range []string{``, `null`, `  `} {
		if s, err := StructFromJSON([]byte(in)); err != nil || s != nil {
			t.Errorf("%q: want nil, nil; got %v, %v", in, s, err)
		}
	}
}

// TestIntegersSurviveDoubles: a violation's mcp_error_code comes back as a
// double and must still decode into cpex's *int.
func TestReplyRoundTrip(t *testing.T) {
	code, status := -32602, 403
	f := false
	in := &cpex.InvokeHookReply{
		PluginName: "deny",
		Result: &cpex.PluginResult{ContinueProcessing: &f, ModifiedPayload: json.RawMessage(`{"name":"x","args":{"n":3}}`),
			Violation: &cpex.PluginViolation{Reason: "r", Description: "d", Code: "C", Details: map[string]any{"k": "v"}, MCPErrorCode: &code, HTTPStatusCode: &status}},
		Context: &cpex.PluginContext{State: map[string]any{"s": 1.0}, Metadata: map[string]any{},
			GlobalContext: cpex.GlobalContext{RequestID: "r1", User: json.RawMessage(`{"sub":"bob"}`), State: map[string]any{}, Metadata: map[string]any{}}},
		Error: &cpex.PluginErrorModel{Message: "m", PluginName: "deny", Code: "E", MCPErrorCode: &code},
	}
	pb, err := ReplyToPB(in)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := proto.Marshal(pb)
	if err != nil {
		t.Fatal(err)
	}
	var back InvokeHookResponse
	if err := proto.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	got, err := ReplyFromPB(&back)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(in)
	have, _ := json.Marshal(got)
	var w, h any
	_ = json.Unmarshal(want, &w)
	_ = json.Unmarshal(have, &h)
	if diff := cmp.Diff(w, h); diff != "" {
		t.Errorf("-want +got\n%s", diff)
	}
}

func TestContextUser(t *testing.T) {
	for _, user := range []string{`"alice"`, `{"sub":"bob"}`, ``} {
		c := cpex.NewContext(cpex.GlobalContext{RequestID: "r", User: json.RawMessage(user)})
		pb, err := ContextToPB(c)
		if err != nil {
			t.Fatal(err)
		}
		back, err := ContextFromPB(pb)
		if err != nil {
			t.Fatal(err)
		}
		if string(back.GlobalContext.User) != user {
			t.Errorf("user %s came back as %s", user, back.GlobalContext.User)
		}
	}
	if _, err := ContextToPB(cpex.NewContext(cpex.GlobalContext{User: json.RawMessage(`[1]`)})); err == nil {
		t.Error("a list user must be refused")
	}
}

func TestFrames(t *testing.T) {
	m := &GetPluginConfigRequest{Name: "pii"}
	b, err := AppendFrame(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if want := []byte{0, 0, 0, 5, 0x0a, 3, 'p', 'i', 'i'}; !bytes.Equal(b, want) {
		t.Fatalf("frame %x, want %x", b, want)
	}
	r := bytes.NewReader(append(b, 0, 0, 0, 0))
	if got, err := ReadFrame(r, nil); err != nil || !bytes.Equal(got, b[4:]) {
		t.Fatalf("ReadFrame = %x, %v", got, err)
	}
	if got, err := ReadFrame(r, nil); err != nil || len(got) != 0 {
		t.Fatalf("empty frame = %x, %v", got, err)
	}
	if _, err := ReadFrame(r, nil); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{0, 0, 0, 9, 1}), nil); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut frame: %v", err)
	}
	if _, err := ReadFrame(bytes.NewReader([]byte{1, 0, 0, 1}), nil); err != ErrFrameTooLarge {
		t.Fatalf("huge frame: %v", err)
	}
}

// FuzzJSON: whatever decodes must encode to JSON that encoding/json reads
// back to the same value (numbers as float64).
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5,"x",null,true,{"b":{}}]}`, `{"e":1e300,"u":"\u00e9"}`, `[]`, `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ValueFromJSON(data)
		if err != nil || v == nil {
			return
		}
		out, err := ValueToJSON(nil, v)
		if err != nil {
			t.Fatalf("encode %s: %v", data, err)
		}
		var a, b any
		if err := json.Unmarshal(data, &a); err != nil {
			t.Fatalf("accepted %q, which encoding/json refuses: %v", data, err)
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("wrote invalid JSON %s: %v", out, err)
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Fatalf("round trip of %s changed it: %s", data, diff)
		}
	})
}

var benchPayload = []byte(`{"name":"search","args":{"query":"find the quarterly report","limit":10,"filters":{"owner":"alice","tags":["finance","q3"]}},"headers":{"x-request-id":"abc"}}`)

func BenchmarkStructFromJSON(b *testing.B) {
	b.Run("jsontext", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := StructFromJSON(benchPayload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s structpb.Struct
			if err := protojson.Unmarshal(benchPayload, &s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("map+NewStruct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var m map[string]any
			if err := json.Unmarshal(benchPayload, &m); err != nil {
				b.Fatal(err)
			}
			if _, err := structpb.NewStruct(m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkStructToJSON(b *testing.B) {
	s, _ := StructFromJSON(benchPayload)
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 512)
		for b.Loop() {
			if _, err := StructToJSON(buf[:0], s); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := protojson.Marshal(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
