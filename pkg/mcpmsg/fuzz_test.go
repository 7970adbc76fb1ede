package mcpmsg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/go-cmp/cmp"
)

// FuzzParse checks that Parse never panics, only accepts valid JSON (as
// jsontext sees it), gives the same verdict and error as validating with
// jsontext before the scan (parseTwoPass), and that what it returns is
// consistent: every Message.Raw re-parses to the same fields, Join
// reproduces the body, and the rewriters keep the result parseable. Seeds:
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := Parse(body)
		b2, err2 := parseTwoPass(body)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("Parse: %v; validating first with jsontext: %v", err, err2)
		}
		if err != nil && err.Error() != err2.Error() {
			t.Fatalf("Parse: %v; validating first with jsontext: %v", err, err2)
		}
		if err == nil {
			if diff := cmp.Diff(gotBody(b), gotBody(b2)); diff != "" {
				t.Fatalf("Parse and the two-pass parse differ (-one +two):\n%s", diff)
			}
		}
		// ParseList accepts and refuses alike, and its index says what
		// the result holds.
		bl, errl := ParseList(body, ListKeys{Items: "tools", Name: "name"})
		if (err == nil) != (errl == nil) || (err != nil && err.Error() != errl.Error()) {
			t.Fatalf("Parse: %v; ParseList: %v", err, errl)
		}
		if err == nil {
			if diff := cmp.Diff(gotBody(b), gotBody(bl)); diff != "" {
				t.Fatalf("Parse and ParseList differ (-Parse +ParseList):\n%s", diff)
			}
			for i := range bl.Messages {
				checkListIndex(t, &bl.Messages[i])
			}
		}
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
		if !json.Valid(body) || !jsontext.Value(body).IsValid() {
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
		b3, err := Parse(j)
		if err != nil || len(b3.Messages) != len(b.Messages) || b3.Batch != b.Batch {
			t.Fatalf("Join(same) = %q does not re-parse alike: %v", j, err)
		}
		for i := range b.Messages {
			if diff := cmp.Diff(got(b.Messages[i]), got(b3.Messages[i])); diff != "" {
				t.Fatalf("Join(same) message %d differs:\n%s", i, diff)
			}
		}
	})
}

// parseTwoPass is Parse as it was before the scan validated: jsontext
// checks the whole body, then the scan splits it.
func parseTwoPass(body []byte) (*Body, error) {
	if err := checkJSON(body); err != nil {
		return nil, err
	}
	b, err := scanBody(body, ListKeys{}, false)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// gotBody is what a Body says, for comparisons.
func gotBody(b *Body) any {
	ms := make([]any, len(b.Messages))
	for i, m := range b.Messages {
		ms[i] = got(m)
	}
	return struct {
		Batch    bool
		Messages []any
	}{b.Batch, ms}
}

// FuzzScanValid checks the scanner's validation against jsontext's on any
// value: what the scanner accepts jsontext does, and what jsontext accepts
// the scanner refuses only for its own rules: names equal ignoring case
// (foldDups finds them the slow way) or nesting deeper than MaxDepth.
func FuzzScanValid(f *testing.F) {
	for _, seed := range []string{
		`{"a":[1,-0.5e+3,true,false,null,"x\u00e9\ud83d\ude00\n"]}`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`,
		`"\ud800\udc00"`, "\"\xed\xa0\x80\"", "\"\xff\"", "\"\x7f\x1f\"", `01`, `-`, `1.`, `1e`, `1e+`, `.5`,
		`tru`, `nul`, `falsey`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"K":1,"\u212a":2}`,
		`"\x"`, `"\u12"`, `"\u12G4"`, " [ ] ", `{}`, `[[]]`, "\xef\xbb\xbf1", `1 2`, "",
		`{"Ab":1,"aB":2}`, `{"ab":1,"aC":2,"Ab":3}`, `{"k":1,"\u212a":2}`, `{"s":{"ſ":1,"S":2}}`, `{"ab":1,"abc":2,"ABC":3}`,
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
	} {
		f.Add([]byte(seed))
	}
	// More names than linearNames: the object switches to a map.
	many := []byte(`{`)
	for i := range linearNames + 4 {
		many = fmt.Appendf(many, `"n%d":%d,`, i, i)
	}
	f.Add(append(many, `"N3":0}`...))
	for _, dir := range []string{"requests", "responses"} {
		for _, body := range readDir(f, dir) {
			f.Add(body)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ok := validValue(b)
		valid := jsontext.Value(b).IsValid()
		if ok && !valid {
			t.Fatalf("the scanner accepts %q, which jsontext refuses", b)
		}
		if !valid {
			return
		}
		dup, depth := foldDups(t, b)
		switch {
		case ok && (dup || depth > MaxDepth):
			t.Fatalf("the scanner accepts %q: names equal ignoring case %v, depth %d", b, dup, depth)
		case !ok && !dup && depth <= MaxDepth:
			s := scanner{b: b}
			_, err := s.value(s.ws(0))
			t.Fatalf("the scanner refuses %q, valid JSON without names equal ignoring case: %v", b, err)
		}
	})
}

// foldDups reads b, valid JSON, token by token with jsontext and reports
// whether an object has two member names equal under Unicode case folding
// (compared pairwise, without the scanner's keys), and how deep it nests.
func foldDups(t *testing.T, b []byte) (dup bool, depth int) {
	t.Helper()
	d := jsontext.NewDecoder(bytes.NewReader(b))
	var names [][][]byte // per open object, its names
	for {
		tok, err := d.ReadToken()
		if err == io.EOF {
			return dup, depth
		}
		if err != nil {
			t.Fatalf("reading %q: %v", b, err)
		}
		depth = max(depth, d.StackDepth())
		switch tok.Kind() {
		case '{':
			names = append(names, nil)
		case '}':
			names = names[:len(names)-1]
		case '"':
			if k, n := d.StackIndex(d.StackDepth()); k == '{' && n%2 == 1 {
				name := []byte(tok.String())
				top := &names[len(names)-1]
				for _, p := range *top {
					dup = dup || foldEqual(p, name)
				}
				*top = append(*top, name)
			}
		}
	}
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

// checkListIndex checks what ParseList's index of m says against the
// result read with encoding/json.
func checkListIndex(t *testing.T, m *Message) {
	t.Helper()
	ix, ok := m.ListIndex()
	if !ok {
		return
	}
	var res map[string]json.RawMessage
	if err := json.Unmarshal(m.Result, &res); err != nil {
		t.Fatalf("indexed result %q: %v", m.Result, err)
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal(res["tools"], &items); err != nil {
		t.Fatalf("indexed result %q: tools: %v", m.Result, err)
	}
	raw := m.Raw
	if raw[ix.Open-1] != '[' || raw[ix.Close] != ']' || len(items) != len(ix.Items) {
		t.Fatalf("index %+v of %q: array or count wrong", ix, m.Result)
	}
	for k, it := range ix.Items {
		if !bytes.Equal(bytes.TrimSpace(raw[it.Start:it.End]), raw[it.Start:it.End]) || raw[it.Start] != '{' {
			t.Fatalf("item %d span %q", k, raw[it.Start:it.End])
		}
		var name string
		if it.NameStart >= 0 {
			if err := json.Unmarshal(raw[it.NameStart-1:it.NameEnd+1], &name); err != nil {
				t.Fatalf("item %d name %q: %v", k, raw[it.NameStart-1:it.NameEnd+1], err)
			}
		}
		var want string
		_ = json.Unmarshal(items[k]["name"], &want)
		if name != want {
			t.Fatalf("item %d: index names %q, want %q", k, name, want)
		}
	}
}
