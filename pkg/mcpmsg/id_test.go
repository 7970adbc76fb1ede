package mcpmsg

import (
	"errors"
	"testing"
)

func TestCanonicalID(t *testing.T) {
	tests := []struct {
		id, want string // want "" means ErrID
	}{
		{`0`, `0`},
		{`7`, `7`},
		{`-7`, `-7`},
		{`9007199254740991`, `9007199254740991`},
		{`-9007199254740991`, `-9007199254740991`},
		{`9007199254740992`, ``},
		{`10000000000000000`, ``},
		{`7.0`, ``},
		{`7e0`, ``},
		{`70e-1`, ``},
		{`-0`, ``},
		{`07`, ``},
		{`+7`, ``},
		{`-`, ``},
		{`"a"`, `"a"`},
		{`""`, `""`},
		{`"\u0061"`, `"a"`},
		{`"\u003c\/"`, `"</"`},
		{`"a\"b"`, `"a\"b"`},
		{`"\n"`, `"\n"`},
		{`null`, ``},
		{`true`, ``},
		{`{}`, ``},
		{``, ``},
		{`"unterminated`, ``},
	}
	for _, tt := range tests {
		got, err := CanonicalID([]byte(tt.id))
		if tt.want == "" {
			if !errors.Is(err, ErrID) {
				t.Errorf("CanonicalID(%s) = %s, %v; want ErrID", tt.id, got, err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("CanonicalID(%s) = %s, %v; want %s", tt.id, got, err, tt.want)
		}
	}
}

// Every request id Parse accepts has a canonical form, so that whatever
// the server answers can be matched to it.
func FuzzCanonicalID(f *testing.F) {
	for _, s := range []string{`1`, `-1`, `"x"`, `"\u00e9"`, `1.0`, `9007199254740991`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"ping"}`
		b, err := Parse([]byte(body))
		if err != nil {
			return
		}
		canon, err := CanonicalID(b.Messages[0].ID)
		if err != nil {
			t.Fatalf("Parse accepted request id %s, CanonicalID refused it: %v", b.Messages[0].ID, err)
		}
		again, err := CanonicalID(canon)
		if err != nil || string(again) != string(canon) {
			t.Fatalf("CanonicalID not idempotent: %s -> %s -> %s, %v", id, canon, again, err)
		}
	})
}
