package logsafe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rs/zerolog"
)

func TestCap(t *testing.T) {
	tests := []struct {
		name, s string
		n       int
		want    string
	}{
		{"short is kept", "abc", 3, "abc"},
		{"empty", "", 0, ""},
		{"cut with marker", "abcdef", 2, "ab…[truncated 4 bytes]"},
		{"negative n is 0", "abc", -1, "…[truncated 3 bytes]"},
		{"no rune is split", "aé", 2, "a…[truncated 2 bytes]"},
		{"four-byte rune", "x😀y", 3, "x…[truncated 5 bytes]"},
		{"invalid UTF-8 cut at n", "a\xff\xfe\xfd\xfcb", 3, "a\xff\xfe…[truncated 3 bytes]"},
	}
	for _, tt := range tests {
		if got := Cap(tt.s, tt.n); got != tt.want {
			t.Errorf("%s: Cap(%q, %d) = %q, want %q", tt.name, tt.s, tt.n, got, tt.want)
		}
	}
}

func TestCapMiB(t *testing.T) {
	got := Cap(strings.Repeat("é", 1<<19), DefaultCap) // 1 MiB of 2-byte runes
	if !strings.HasSuffix(got, "…[truncated 1048064 bytes]") || len(got) > DefaultCap+len("…[truncated 1048064 bytes]") {
		t.Errorf("Cap of 1 MiB: %d bytes ending %q", len(got), got[len(got)-40:])
	}
	if !utf8.ValidString(got) {
		t.Errorf("Cap split a rune")
	}
}

// lines writes through a Writer and returns what reached the output, line by line.
func lines(t *testing.T, write func(*Writer)) []string {
	t.Helper()
	var out bytes.Buffer
	write(NewWriter(&out))
	if out.Len() > 0 && out.Bytes()[out.Len()-1] != '\n' {
		t.Errorf("output does not end with a newline")
	}
	var ls []string
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		ls = append(ls, sc.Text())
	}
	return ls
}

func TestWriterZerolog(t *testing.T) {
	mib := strings.Repeat("A", 1<<20)
	tests := []struct {
		name string
		log  func(zerolog.Logger)
		keep map[string]string // fields that must survive unchanged
		cut  []string          // fields that must carry the marker
	}{
		{"small line untouched", func(l zerolog.Logger) { l.Info().Str("method", "tools/call").Msg("ok") },
			map[string]string{"method": "tools/call", "message": "ok"}, nil},
		{"1 MiB x-request-id", func(l zerolog.Logger) {
			l.Warn().Str("x_request_id", mib).Str("method", "tools/call").Int("status", 431).Msg("plugin refused")
		}, map[string]string{"method": "tools/call", "message": "plugin refused", "level": "warn"}, []string{"x_request_id"}},
		{"three large fields", func(l zerolog.Logger) {
			l.Info().Str("a", mib[:20000]).Str("b", mib[:30000]).Str("c", strings.Repeat("<\x01", 9000)).Msg("m")
		}, map[string]string{"message": "m"}, []string{"b"}},
		{"value that grows when re-encoded (U+2028 is escaped)", func(l zerolog.Logger) {
			l.Info().Str("v", strings.Repeat("\u2028", 6000)).Msg("m")
		}, map[string]string{"message": "m"}, []string{"v"}},
		{"escaping-heavy value", func(l zerolog.Logger) {
			l.Info().Str("v", strings.Repeat("\x00", 1<<16)).Msg("m")
		}, map[string]string{"message": "m"}, []string{"v"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := lines(t, func(w *Writer) { tt.log(zerolog.New(w)) })
			if len(ls) != 1 {
				t.Fatalf("%d lines, want 1", len(ls))
			}
			line := ls[0]
			if len(line)+1 >= MaxLine {
				t.Errorf("line of %d bytes", len(line)+1)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("not JSON: %v: %.200s", err, line)
			}
			for k, v := range tt.keep {
				if m[k] != v {
					t.Errorf("%s = %v, want %q", k, m[k], v)
				}
			}
			for _, k := range tt.cut {
				if s, _ := m[k].(string); !strings.Contains(s, "…[truncated ") {
					t.Errorf("%s has no truncation marker: %.80q", k, s)
				}
			}
		})
	}
}

func TestWriterFallbacks(t *testing.T) {
	nested := `{"level":"info","args":{"x":"` + strings.Repeat("n", 40000) + `"},"message":"m"}` + "\n"
	ls := lines(t, func(w *Writer) { _, _ = w.Write([]byte(nested)) })
	var m map[string]any
	if len(ls) != 1 || json.Unmarshal([]byte(ls[0]), &m) != nil || m["original_bytes"] != float64(len(nested)-1) {
		t.Errorf("nested value: got %.200q", ls)
	}
	plain := "console line " + strings.Repeat("p", 40000) + "\nshort\n"
	ls = lines(t, func(w *Writer) { _, _ = w.Write([]byte(plain)) })
	if len(ls) != 2 || len(ls[0]) >= MaxLine || !strings.Contains(ls[0], "…[truncated ") || ls[1] != "short" {
		t.Errorf("plain lines: %d lines, first %d bytes", len(ls), len(ls[0]))
	}
}

func TestWriterReportsFullWrite(t *testing.T) {
	w := NewWriter(&bytes.Buffer{})
	p := []byte(strings.Repeat("x", 3*MaxLine) + "\n")
	if n, err := w.Write(p); n != len(p) || err != nil {
		t.Errorf("Write = %d, %v; want %d, nil", n, err, len(p))
	}
}
