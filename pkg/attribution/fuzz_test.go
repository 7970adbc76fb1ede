package attribution

import (
	"context"
	"errors"
	"testing"
	"time"
)

// FuzzOps runs a sequence of operations, decoded from the input, against a
// small Store and a reference model without bounds, and checks: a lookup
// never returns an origin that was not the last one recorded for its key
// (nor one at all for an ambiguous key), the bounds hold after every step,
// a key just recorded is found, and a key recorded twice in a row with two
// origins is ambiguous.
func FuzzOps(f *testing.F) {
	f.Add([]byte{0, 1, 1, 0, 1, 1, 4, 1, 1})
	f.Add([]byte{0, 1, 1, 0, 1, 1, 1, 1, 2, 4, 1, 1})
	f.Add([]byte{2, 3, 5, 0, 3, 5, 5, 0, 5, 3, 5, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 2, 0, 0, 3, 6, 0, 0, 4, 0, 0})
	f.Fuzz(func(t *testing.T, prog []byte) {
		c := newClock()
		opts := Options{MaxRequests: 6, MaxRequestsPerSession: 3, MaxTasks: 4, MaxTasksPerSession: 2,
			Shards: 2, RequestTTL: 10 * time.Second, TaskTTL: 20 * time.Second, Now: c.Now}
		s := New(opts)
		origins := []Origin{echo, list, greet, {Method: "resources/read", Name: "mem://x"}}
		sessions := []string{"", "a", "b", "c"}
		ids := [][]byte{[]byte("1"), []byte(`"1"`), []byte(`"\u0031"`), []byte("2"), []byte(`"x"`), []byte("-3.5e2"), []byte("{")}
		last := map[string]Origin{} // last origin recorded per key, unbounded
		prevKey := ""               // key of the previous operation if it was a Record
		for len(prog) >= 3 {
			op, a, b := prog[0]%7, prog[1], prog[2]
			prog = prog[3:]
			sess := sessions[int(a)%len(sessions)]
			id := ids[int(b)%len(ids)]
			o := origins[int(a/4)%len(origins)]
			canon, cerr := canonicalID(id)
			rkey := "r" + sess + "\x00" + string(canon)
			tkey := "t" + sess + "\x00" + string(id)
			thisKey := ""
			switch op {
			case 0, 1:
				err := s.Record(context.Background(), sess, id, o)
				if (err != nil) != (cerr != nil) {
					t.Fatalf("Record(%q) = %v, canonical error %v", id, err, cerr)
				}
				if err == nil {
					thisKey = rkey
					prev := last[rkey]
					last[rkey] = o
					got, err := s.Lookup(context.Background(), sess, id)
					if prevKey == rkey && prev != o && !errors.Is(err, ErrAmbiguous) {
						t.Fatalf("id %s recorded as %+v then %+v: lookup = %+v, %v; want ErrAmbiguous", id, prev, o, got, err)
					}
					if err != nil && !errors.Is(err, ErrAmbiguous) || err == nil && got != o {
						t.Fatalf("fresh lookup = %+v, %v; want %+v", got, err, o)
					}
				}
			case 2:
				if s.RecordTask(context.Background(), sess, string(id), o) == nil {
					last[tkey] = o
				}
			case 3:
				c.Add(time.Duration(b) * time.Second)
			case 4:
				got, err := s.Lookup(context.Background(), sess, id)
				check(t, got, err, last, rkey)
			case 5:
				got, err := s.LookupTask(context.Background(), sess, string(id))
				check(t, got, err, last, tkey)
			case 6:
				s.ForgetSession(context.Background(), sess)
			}
			prevKey = thisKey
			st := s.Stats()
			if st.Requests > opts.MaxRequests || st.Tasks > opts.MaxTasks || st.Bytes < 0 {
				t.Fatalf("bounds broken: %+v", st)
			}
		}
	})
}

// check: a found origin must be the last one recorded for key. (Unknown and
// ambiguous are always allowed: eviction, expiry, filter false positives.)
func check(t *testing.T, got Origin, err error, last map[string]Origin, key string) {
	t.Helper()
	if err != nil {
		return
	}
	if want, ok := last[key]; !ok || want != got {
		t.Fatalf("lookup %q = %+v; last recorded %+v (recorded: %v)", key, got, want, ok)
	}
}
