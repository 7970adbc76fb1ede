package executor

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/cpex"
)

func TestCheckPayload(t *testing.T) {
	tests := []struct {
		hook    cpex.HookType
		payload string
		ok      bool
	}{
		{cpex.ToolPreInvoke, `{"name":"fetch","args":{"url":"x"}}`, true},
		{cpex.ToolPreInvoke, `{"name":"fetch"}`, true},
		{cpex.ToolPreInvoke, `{"name":"fetch","args":null,"headers":null}`, true},
		{cpex.ToolPreInvoke, `{"name":"fetch","args":{},"headers":{"x-a":"1"}}`, true},
		{cpex.ToolPreInvoke, `{"name":"","args":{}}`, false},
		{cpex.ToolPreInvoke, `{"args":{}}`, false},
		{cpex.ToolPreInvoke, `{"name":7,"args":{}}`, false},
		{cpex.ToolPreInvoke, `{"name":"fetch","args":"x"}`, false},
		{cpex.ToolPreInvoke, `{"name":"fetch","args":[1]}`, false},
		{cpex.ToolPreInvoke, `{"name":"fetch","headers":{"x":1}}`, false},
		{cpex.ToolPreInvoke, `{"name":"fetch","headers":["x"]}`, false},
		{cpex.ToolPreInvoke, `[]`, false},
		{cpex.ToolPreInvoke, `null`, false},
		{cpex.ToolPreInvoke, `"s"`, false},
		{cpex.ToolPreInvoke, `{`, false},
		{cpex.ToolPostInvoke, `{"name":"fetch","result":{"content":[],"isError":false}}`, true},
		{cpex.ToolPostInvoke, `{"name":"","result":{}}`, true},
		{cpex.ToolPostInvoke, `{"name":"fetch"}`, false},
		{cpex.ToolPostInvoke, `{"name":"fetch","result":null}`, false},
		{cpex.ToolPostInvoke, `{"name":"fetch","result":"text"}`, false},
		{cpex.ToolPostInvoke, `{"result":{}}`, false},
		{cpex.PromptPreFetch, `{"prompt_id":"greet","args":{"who":"bob"}}`, true},
		{cpex.PromptPreFetch, `{"prompt_id":"greet"}`, true},
		{cpex.PromptPreFetch, `{"prompt_id":"greet","args":{"n":1}}`, false},
		{cpex.PromptPreFetch, `{"prompt_id":"","args":{}}`, false},
		{cpex.PromptPostFetch, `{"prompt_id":"greet","result":{"messages":[]}}`, true},
		{cpex.PromptPostFetch, `{"prompt_id":"greet","result":[]}`, false},
		{cpex.ResourcePreFetch, `{"uri":"file:///a","metadata":{}}`, true},
		{cpex.ResourcePreFetch, `{"uri":"file:///a"}`, true},
		{cpex.ResourcePreFetch, `{"uri":"file:///a","metadata":"m"}`, false},
		{cpex.ResourcePreFetch, `{"uri":""}`, false},
		{cpex.ResourcePostFetch, `{"uri":"file:///a","content":{"contents":[]}}`, true},
		{cpex.ResourcePostFetch, `{"uri":"file:///a","content":[{"text":"x"}]}`, true},
		{cpex.ResourcePostFetch, `{"uri":"file:///a"}`, false},
		{cpex.ResourcePostFetch, `{"uri":"file:///a","content":null}`, false},
		{"http_pre_request", `{"anything":1}`, true},
		{"http_pre_request", `[1]`, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.hook)+" "+tt.payload, func(t *testing.T) {
			err := checkPayload(tt.hook, json.RawMessage(tt.payload))
			if (err == nil) != tt.ok {
				t.Fatalf("checkPayload = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidPayload) {
				t.Errorf("error %v does not wrap ErrInvalidPayload", err)
			}
		})
	}
}

func TestJSONEqual(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{`{"a":1,"b":[1,2]}`, `{ "b": [1, 2], "a": 1 }`, true},
		{`{"a":1}`, `{"a":1.0}`, false},
		{`{"a":12345678901234567890}`, `{"a":12345678901234567891}`, false},
		{`{"a":"x"}`, `{"a":"y"}`, false},
		{`{"a":null}`, `{}`, false},
		{`{`, `{`, true},
		{`{`, `}`, false},
	}
	for _, tt := range tests {
		if got := jsonEqual(json.RawMessage(tt.a), json.RawMessage(tt.b)); got != tt.want {
			t.Errorf("jsonEqual(%s, %s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestUserStrings(t *testing.T) {
	tests := []struct {
		raw  string
		want []string
	}{
		{``, nil},
		{`null`, nil},
		{`""`, nil},
		{`"alice"`, []string{"alice"}},
		{`{"email":"a@b","id":"u1","name":"A"}`, []string{"a@b", "u1"}},
		{`{"id":7}`, []string{"7"}},
		{`{"email":null}`, nil},
		{`[1]`, nil},
	}
	for _, tt := range tests {
		got := userStrings(json.RawMessage(tt.raw))
		if len(got) != len(tt.want) {
			t.Errorf("userStrings(%s) = %q, want %q", tt.raw, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("userStrings(%s) = %q, want %q", tt.raw, got, tt.want)
			}
		}
	}
}

// FuzzCheckPayload: plugin output never panics the shape check, and an
// accepted tool_pre_invoke payload decodes into the wire type.
func FuzzCheckPayload(f *testing.F) {
	for _, s := range []string{`{"name":"fetch","args":{"u":1}}`, `{"name":"x","headers":{"a":"b"}}`, `{}`, `[]`, `null`, `{"name":"x","args":null}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, h := range cpex.MCPHooks {
			_ = checkPayload(h, json.RawMessage(s))
		}
		if checkPayload(cpex.ToolPreInvoke, json.RawMessage(s)) == nil {
			var p cpex.ToolPreInvokePayload
			if err := json.Unmarshal([]byte(s), &p); err != nil || p.Name == "" {
				t.Fatalf("accepted %q but it does not decode: %v", s, err)
			}
		}
	})
}
