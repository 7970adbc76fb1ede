package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcp-extproc/mcp-extproc/internal/redistest"
	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m, redistest.IgnoreDialProbe()) }

var (
	echo = attribution.Origin{Method: "tools/call", Name: "echo"}
	list = attribution.Origin{Method: "tools/list"}
	bg   = context.Background()
)

// counter is an Observer that counts.
type counter struct {
	mu        sync.Mutex
	ops, errs int
	fallbacks map[string]int // op/reason
}

func (c *counter) StoreOp(op string, _ time.Duration, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ops++
	if err != nil {
		c.errs++
	}
}

func (c *counter) StoreFallback(op, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fallbacks == nil {
		c.fallbacks = map[string]int{}
	}
	c.fallbacks[op+"/"+reason]++
}

func (c *counter) fallback(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fallbacks[key]
}

// replica is a Store on srv, closed at the end of the test.
func replica(t *testing.T, srv *redistest.Server, mod func(*Options)) *Store {
	t.Helper()
	o := Options{Addrs: []string{srv.Addr()}, OpTimeout: time.Second, Backoff: 10 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func mustOrigin(t *testing.T, what string, got attribution.Origin, err error, want attribution.Origin) {
	t.Helper()
	if err != nil || got != want {
		t.Fatalf("%s: %+v, %v; want %+v", what, got, err, want)
	}
}

func mustErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
}

// TestAcrossReplicas: what one replica records, another finds; ids are
// compared as JSON values; a reuse through another replica is ambiguous on
// both; a forgotten session is forgotten everywhere; tasks are found and
// kept locally.
func TestAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	a, b := replica(t, srv, nil), replica(t, srv, nil)

	if err := a.Record(bg, "s1", []byte(`"\u0061"`), echo); err != nil {
		t.Fatal(err)
	}
	a.sync()
	o, err := b.Lookup(bg, "s1", []byte(`"a"`))
	mustOrigin(t, "b finds a's request", o, err, echo)
	_, err = b.Lookup(bg, "s2", []byte(`"a"`))
	mustErr(t, "another session", err, attribution.ErrUnknown)
	_, err = b.Lookup(bg, "s1", []byte(`7`))
	mustErr(t, "never recorded", err, attribution.ErrUnknown)

	// id 7 is a tools/list through a, then a tools/call through b.
	if err := a.Record(bg, "s1", []byte(`7`), list); err != nil {
		t.Fatal(err)
	}
	a.sync()
	if err := b.Record(bg, "s1", []byte(`7`), echo); err != nil {
		t.Fatal(err)
	}
	b.sync()
	_, err = a.Lookup(bg, "s1", []byte(`7`))
	mustErr(t, "reused id on a (its memory says tools/list)", err, attribution.ErrAmbiguous)
	_, err = b.Lookup(bg, "s1", []byte(`7`))
	mustErr(t, "reused id on b", err, attribution.ErrAmbiguous)

	if err := a.RecordTask(bg, "s1", "task-1", echo); err != nil {
		t.Fatal(err)
	}
	o, err = b.LookupTask(bg, "s1", "task-1")
	mustOrigin(t, "b finds a's task (no sync: the task record is written through)", o, err, echo)
	o, err = b.Local().LookupTask(bg, "s1", "task-1")
	mustOrigin(t, "b kept the task locally", o, err, echo)

	b.ForgetSession(bg, "s1")
	b.sync()
	c := replica(t, srv, nil)
	_, err = c.Lookup(bg, "s1", []byte(`"a"`))
	mustErr(t, "forgotten request", err, attribution.ErrUnknown)
	_, err = c.LookupTask(bg, "s1", "task-1")
	mustErr(t, "forgotten task", err, attribution.ErrUnknown)
	if n := srv.Client(t).DBSize(bg).Val(); n != 0 {
		t.Errorf("%d keys left after ForgetSession", n)
	}
}

// TestSessionCapAndReuse: the per-session cap holds in Redis (oldest
// entries leave first), and an id recorded again after its entry left is
// ambiguous, as in the in-process store.
func TestSessionCapAndReuse(t *testing.T) {
	srv := redistest.Start(t)
	bounds := func(o *Options) { o.Bounds.MaxRequestsPerSession = 4 }
	a, b := replica(t, srv, bounds), replica(t, srv, bounds)
	for i := range 6 {
		if err := a.Record(bg, "s", fmt.Appendf(nil, "%d", i), echo); err != nil {
			t.Fatal(err)
		}
	}
	a.sync()
	for i := range 6 {
		_, err := b.Lookup(bg, "s", fmt.Appendf(nil, "%d", i))
		if want := i >= 2; (err == nil) != want {
			t.Errorf("id %d: %v, want found %v", i, err, want)
		}
	}
	if n := srv.Client(t).LLen(bg, a.keys.session("ri", "s")).Val(); n != 4 {
		t.Errorf("session list holds %d entries, want 4", n)
	}
	if err := b.Record(bg, "s", []byte(`0`), list); err != nil {
		t.Fatal(err)
	}
	b.sync()
	_, err := a.Lookup(bg, "other-session-unused", []byte(`0`))
	mustErr(t, "other session", err, attribution.ErrUnknown)
	c := replica(t, srv, bounds)
	_, err = c.Lookup(bg, "s", []byte(`0`))
	mustErr(t, "id 0 recorded again after it was evicted", err, attribution.ErrAmbiguous)
}

// TestRedisDown: with redis-server killed, lookups answer from the local
// memory (what it knows) or ErrUnknown (the rest), writes are dropped and
// counted; once it is back on the same port, records and lookups across
// replicas work again.
func TestRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	obsA, obsB := &counter{}, &counter{}
	a := replica(t, srv, func(o *Options) { o.Observer = obsA; o.OpTimeout = 50 * time.Millisecond })
	b := replica(t, srv, func(o *Options) { o.Observer = obsB; o.OpTimeout = 50 * time.Millisecond })
	if err := a.Record(bg, "s", []byte(`1`), echo); err != nil {
		t.Fatal(err)
	}
	a.sync()

	srv.Kill()
	o, err := a.Lookup(bg, "s", []byte(`1`))
	mustOrigin(t, "a's own record while redis is down", o, err, echo)
	_, err = b.Lookup(bg, "s", []byte(`1`))
	mustErr(t, "b while redis is down", err, attribution.ErrUnknown)
	if err := a.RecordTask(bg, "s", "t", echo); err != nil {
		t.Fatal(err)
	}
	_, err = b.LookupTask(bg, "s", "t")
	mustErr(t, "task while redis is down", err, attribution.ErrUnknown)
	if obsB.fallback("lookup/error")+obsB.fallback("lookup/down") == 0 || obsA.errs == 0 && obsA.fallback("write/error")+obsA.fallback("write/down") == 0 {
		t.Errorf("fallbacks not counted: a %+v, b %+v", obsA.fallbacks, obsB.fallbacks)
	}

	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := a.Record(bg, "s", []byte(`2`), echo); err != nil {
			t.Fatal(err)
		}
		a.sync()
		if o, err := b.Lookup(bg, "s", []byte(`2`)); err == nil && o == echo {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no recovery after redis-server came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := a.RecordTask(bg, "s", "t2", echo); err != nil {
		t.Fatal(err)
	}
	o, err = b.LookupTask(bg, "s", "t2")
	mustOrigin(t, "task after recovery", o, err, echo)
}

// TestBadAddressNoHang: an address nobody listens on costs a few bounded
// attempts, then the backoff; every call returns.
func TestBadAddressNoHang(t *testing.T) {
	obs := &counter{}
	s, err := New(Options{Addrs: []string{"127.0.0.1:1"}, OpTimeout: 20 * time.Millisecond, Backoff: time.Hour, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 50 {
		if err := s.Record(bg, "s", fmt.Appendf(nil, "%d", i), echo); err != nil {
			t.Fatal(err)
		}
		_, err := s.Lookup(bg, "s", []byte(`"x"`))
		mustErr(t, "unknown id", err, attribution.ErrUnknown)
	}
	s.sync()
	// failuresToDown in a row start the backoff; the writer's batch may
	// be in flight beside the lookups.
	if obs.ops > failuresToDown+1 {
		t.Errorf("%d round trips tried during one backoff, want at most %d", obs.ops, failuresToDown+1)
	}
	if _, err := New(Options{}); !errors.Is(err, ErrNoAddrs) {
		t.Errorf("New without addresses: %v", err)
	}
}
