package redisstore

import (
	"testing"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
)

// FuzzKeys: two different (session, id) pairs never share a key, whatever
// bytes the session holds, for request ids (canonical JSON) and task ids
// alike; and an origin read back is the one written.
func FuzzKeys(f *testing.F) {
	f.Add("s", "7", "s", "8", "tools/call", "echo")
	f.Add("a}:1", `"x"`, "a", `"}:1\"x"`, "m", "")
	f.Add("", "1", "}", "1", "", "n")
	k := keyspace{prefix: DefaultKeyPrefix}
	f.Fuzz(func(t *testing.T, s1, id1, s2, id2, method, name string) {
		c1, err1 := attribution.CanonicalID([]byte(id1))
		c2, err2 := attribution.CanonicalID([]byte(id2))
		if err1 == nil && err2 == nil && (s1 != s2 || string(c1) != string(c2)) && k.request(s1, c1) == k.request(s2, c2) {
			t.Fatalf("request (%q, %s) and (%q, %s) share key %q", s1, c1, s2, c2, k.request(s1, c1))
		}
		if (s1 != s2 || id1 != id2) && k.task(s1, id1) == k.task(s2, id2) {
			t.Fatalf("task (%q, %q) and (%q, %q) share a key", s1, id1, s2, id2)
		}
		o := attribution.Origin{Method: method, Name: name}
		got, err := decodeOrigin(encodeOrigin(o))
		if err != nil || got != o {
			t.Fatalf("origin %+v read back as %+v, %v", o, got, err)
		}
		if _, err := decodeOrigin(method); err == nil && method != encodeOrigin(mustDecode(method)) {
			t.Fatalf("value %q decodes but is not what encoding its origin gives", method)
		}
	})
}

func mustDecode(v string) attribution.Origin {
	o, _ := decodeOrigin(v)
	return o
}
