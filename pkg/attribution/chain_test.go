package attribution

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// checkChain walks c from head to tail through at and fails unless every
// link agrees with its neighbour, the ends are nil-terminated, the tail is
// the last entry reached and the chain holds want entries.
func checkChain(t *testing.T, what string, c chain, at func(*entry) *links, want int) {
	t.Helper()
	if (c.head == nil) != (c.tail == nil) {
		t.Fatalf("%s: head %p, tail %p", what, c.head, c.tail)
	}
	n := 0
	var prev *entry
	for e := c.head; e != nil; e = at(e).next {
		if at(e).prev != prev {
			t.Fatalf("%s: entry %d's prev does not point at entry %d", what, n, n-1)
		}
		prev, n = e, n+1
		if n > want {
			t.Fatalf("%s: more than %d entries (a loop?)", what, want)
		}
	}
	if prev != c.tail || n != want {
		t.Fatalf("%s: %d entries ending at %p, want %d ending at the tail %p", what, n, prev, want, c.tail)
	}
}

// checkShard checks the shard's list and every session's list against the
// shard's counts.
func checkShard(t *testing.T, s *shard) {
	t.Helper()
	checkChain(t, "shard", s.entries, shardLinks, s.n)
	for id, ss := range s.sessions {
		checkChain(t, "session "+id, ss.entries, sessionLinks, ss.n)
	}
}

// The lists stay consistent whichever entry leaves them: the newest (a key
// recorded again), the oldest (eviction, expiry), one in the middle, and a
// whole session.
func TestListsStayLinked(t *testing.T) {
	now := time.Unix(0, 0)
	s := New(Options{MaxRequests: 6, MaxRequestsPerSession: 4, Shards: 1, RequestTTL: time.Minute,
		Now: func() time.Time { return now }})
	sh := s.requests[0]
	record := func(session string, id int) {
		t.Helper()
		if err := s.Record(context.Background(), session, []byte(fmt.Sprint(id)), echo); err != nil {
			t.Fatal(err)
		}
		checkShard(t, sh)
	}
	for i := range 3 {
		record("a", i)
	}
	record("a", 2) // the newest again
	record("a", 1) // one in the middle
	record("a", 0) // the oldest
	record("b", 10)
	for i := 3; i < 8; i++ {
		record("a", i) // over the per-session and the shard bounds: evictions
	}
	s.ForgetSession(context.Background(), "b")
	checkShard(t, sh)
	now = now.Add(2 * time.Minute)
	record("c", 20) // everything else expires
	if sh.n != 1 {
		t.Errorf("%d entries after expiry, want 1", sh.n)
	}
}
