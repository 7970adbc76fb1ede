package redisstore

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/redistest"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
)

// TestKeysBounded: 100 000 requests and 400 tasks over 200 sessions leave
// at most the per-session caps (plus each session's two lists and its
// filter) in Redis, and every key has a TTL no longer than its table's.
// The TTL is long enough that no key expires while the test reads them.
func TestKeysBounded(t *testing.T) {
	srv := redistest.Start(t)
	const (
		requests, tasks, sessions = 100_000, 400, 200
		perSession, tasksPer      = 32, 4
	)
	ttl := 5 * time.Minute
	s := replica(t, srv, func(o *Options) {
		o.Bounds = attribution.Options{MaxRequestsPerSession: perSession, MaxTasksPerSession: tasksPer, RequestTTL: ttl, TaskTTL: ttl}
		o.QueueSize = 1 << 17 // nothing dropped: the test counts what Redis holds
	})
	record(t, s, requests, tasks, sessions)
	c := srv.Client(t)
	n := c.DBSize(bg).Val()
	if bound := int64(sessions * (perSession + tasksPer + 3)); n > bound || n < sessions*perSession {
		t.Fatalf("DBSIZE %d after %d requests, want between %d and %d", n, requests, sessions*perSession, bound)
	}
	var seen int64
	iter := c.Scan(bg, 0, DefaultKeyPrefix+"*", 1000).Iterator()
	for iter.Next(bg) {
		seen++
		d := c.PTTL(bg, iter.Val()).Val()
		if d <= 0 || d > ttl {
			t.Fatalf("key %q has TTL %v, want in (0, %v]", iter.Val(), d, ttl)
		}
	}
	if err := iter.Err(); err != nil || seen != n {
		t.Fatalf("scan: %d keys of %d, %v", seen, n, err)
	}
}

// TestKeysExpire: with a short TTL every key, of requests, tasks and the
// sessions' lists, actually expires.
func TestKeysExpire(t *testing.T) {
	srv := redistest.Start(t)
	ttl := 300 * time.Millisecond
	s := replica(t, srv, func(o *Options) {
		o.Bounds = attribution.Options{RequestTTL: ttl, TaskTTL: ttl}
	})
	record(t, s, 2000, 40, 20)
	c := srv.Client(t)
	if n := c.DBSize(bg).Val(); n == 0 {
		t.Fatal("nothing reached Redis: the test would prove nothing")
	}
	deadline := time.Now().Add(20 * time.Second)
	for c.DBSize(bg).Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d keys still there long after their TTL", c.DBSize(bg).Val())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// record records requests and tasks spread over sessions and waits until
// they reached Redis.
func record(t *testing.T, s *Store, requests, tasks, sessions int) {
	t.Helper()
	for i := range requests {
		if err := s.Record(bg, "session-"+strconv.Itoa(i%sessions), fmt.Appendf(nil, "%d", i), echo); err != nil {
			t.Fatal(err)
		}
	}
	for i := range tasks {
		if err := s.RecordTask(bg, "session-"+strconv.Itoa(i%sessions), "task-"+strconv.Itoa(i), echo); err != nil {
			t.Fatal(err)
		}
	}
	s.sync()
}
