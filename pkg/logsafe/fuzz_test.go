package logsafe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzWriter: whatever a log line holds, every output line is shorter than
// MaxLine, a newline-terminated write stays newline-terminated, and a JSON
// object line stays a JSON object.
func FuzzWriter(f *testing.F) {
	f.Add([]byte(`{"level":"info","message":"ok"}`+"\n"), 0)
	f.Add([]byte("not json\n"), 3)
	f.Add([]byte(`{"a":"\u0000\u003c","b":[1,2,{"c":"d"}],"n":1.5e3}`+"\n"), 17)
	f.Fuzz(func(t *testing.T, line []byte, pad int) {
		// Grow the line past the limit with a padding string value.
		pad = pad%(3*MaxLine) + MaxLine
		p := line
		if i := bytes.LastIndexByte(line, '}'); i > 0 {
			p = append(append(bytes.Clone(line[:i]), []byte(`,"pad":"`+strings.Repeat("é", pad/2)+`"`)...), line[i:]...)
		}
		var out bytes.Buffer
		n, err := NewWriter(&out).Write(p)
		if err != nil || n != len(p) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		if bytes.HasSuffix(p, []byte("\n")) && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
			t.Fatalf("output does not end with a newline")
		}
		sc := bufio.NewScanner(&out)
		sc.Buffer(nil, 16<<20)
		in := bufio.NewScanner(bytes.NewReader(p))
		in.Buffer(nil, 16<<20)
		for sc.Scan() {
			got := sc.Bytes()
			if len(got)+1 >= MaxLine {
				t.Fatalf("line of %d bytes", len(got)+1)
			}
			if !in.Scan() {
				t.Fatalf("more lines out than in")
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(in.Bytes(), &obj) == nil && json.Unmarshal(got, &obj) != nil {
				t.Fatalf("a JSON object line came out invalid: %.200q", got)
			}
		}
	})
}

// FuzzCap: the result is a prefix of s plus the marker, within n bytes plus
// the marker, and valid UTF-8 when s is.
func FuzzCap(f *testing.F) {
	f.Add("hello", 3)
	f.Add("aé😀", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n %= 1 << 16
		got := Cap(s, n)
		if len(s) <= n {
			if got != s {
				t.Fatalf("Cap(%q, %d) = %q, want s", s, n, got)
			}
			return
		}
		i := strings.LastIndex(got, "…[truncated ")
		if i < 0 || !strings.HasPrefix(s, got[:i]) || i > max(n, 0) {
			t.Fatalf("Cap(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Cap(%q, %d) = %q split a rune", s, n, got)
		}
	})
}
