package mcpmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse checks that Parse never panics, only accepts valid JSON, and
// that what it returns is consistent: every Message.Raw re-parses to the
// same fields, Join reproduces the body, and the rewriters keep the result
// parseable. Seeds: testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := Parse(body)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not an *Error", err, err)
			}
			switch e.Code {
			case CodeParseError, CodeInvalidRequest, CodeInvalidParams:
			default:
				t.Fatalf("unexpected code %d", e.Code)
			}
			if b != nil {
				t.Fatal("non-nil body with an error")
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if len(b.Messages) == 0 {
			t.Fatal("no messages")
		}
		if got := Join(b, nil); !bytes.Equal(got, body) {
			t.Fatalf("Join(nil) = %q, want the body", got)
		}
		same := make(map[int][]byte, len(b.Messages))
		for i, m := range b.Messages {
			same[i] = m.Raw
			one, err := Parse(m.Raw)
			if err != nil {
				t.Fatalf("message %d %q does not re-parse: %v", i, m.Raw, err)
			}
			if one.Batch || len(one.Messages) != 1 {
				t.Fatalf("message %d re-parses as %d messages", i, len(one.Messages))
			}
			if diff := cmp.Diff(got(m), got(one.Messages[0])); diff != "" {
				t.Fatalf("message %d re-parses differently (-first +again):\n%s", i, diff)
			}
			if !bytes.Equal(Join(one, nil), m.Raw) {
				t.Fatalf("Join of message %d differs", i)
			}
			checkViews(t, m)
			checkRewrite(t, m)
		}
		// Replacing every element by itself keeps the body (batches keep the
		// bytes between elements; a single message drops the whitespace).
		j := Join(b, same)
		if b.Batch && !bytes.Equal(j, body) {
			t.Fatalf("Join(same) = %q, want %q", j, body)
		}
		b2, err := Parse(j)
		if err != nil || len(b2.Messages) != len(b.Messages) || b2.Batch != b.Batch {
			t.Fatalf("Join(same) = %q does not re-parse alike: %v", j, err)
		}
		for i := range b.Messages {
			if diff := cmp.Diff(got(b.Messages[i]), got(b2.Messages[i])); diff != "" {
				t.Fatalf("Join(same) message %d differs:\n%s", i, diff)
			}
		}
	})
}

// checkViews compares the standalone param views with what Parse filled in.
func checkViews(t *testing.T, m Message) {
	t.Helper()
	switch m.Method {
	case MethodToolsCall:
		name, args, err := ToolCall(m.Params)
		if err != nil || name != m.Name || !bytes.Equal(args, m.Arguments) {
			t.Fatalf("ToolCall = %q %q %v; Parse: %q %q", name, args, err, m.Name, m.Arguments)
		}
	case MethodPromptsGet:
		name, args, err := PromptGet(m.Params)
		if err != nil || name != m.Name || !bytes.Equal(args, m.Arguments) {
			t.Fatalf("PromptGet = %q %q %v; Parse: %q %q", name, args, err, m.Name, m.Arguments)
		}
	case MethodResourcesRead:
		uri, err := ResourceRead(m.Params)
		if err != nil || uri != m.URI {
			t.Fatalf("ResourceRead = %q %v; Parse: %q", uri, err, m.URI)
		}
	}
}

// checkRewrite rewrites m and checks the result still parses to the same
// envelope.
func checkRewrite(t *testing.T, m Message) {
	t.Helper()
	switch m.Kind {
	case KindRequest, KindNotification:
		if m.Params != nil && m.Params[0] != '{' {
			return
		}
		out, err := ReplaceParams(m, map[string][]byte{"zz_added": []byte(`{"a":[1]}`)})
		if err != nil {
			t.Fatalf("ReplaceParams: %v", err)
		}
		b, err := Parse(out)
		if err != nil {
			t.Fatalf("ReplaceParams result %q does not parse: %v", out, err)
		}
		r := b.Messages[0]
		if r.Kind != m.Kind || !bytes.Equal(r.ID, m.ID) || r.Method != m.Method || r.Name != m.Name || !bytes.Equal(r.Arguments, m.Arguments) || r.URI != m.URI {
			t.Fatalf("ReplaceParams changed the envelope: %q -> %q", m.Raw, out)
		}
	case KindResponse:
		out, err := ReplaceResult(m, []byte(`{"content":[]}`))
		if err != nil {
			t.Fatalf("ReplaceResult: %v", err)
		}
		b, err := Parse(out)
		if err != nil {
			t.Fatalf("ReplaceResult result %q does not parse: %v", out, err)
		}
		if r := b.Messages[0]; r.Kind != KindResponse || !bytes.Equal(r.ID, m.ID) || string(r.Result) != `{"content":[]}` {
			t.Fatalf("ReplaceResult gave %q", out)
		}
	}
}
