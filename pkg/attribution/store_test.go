package attribution

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Unix(1_800_000_000, 0)} }

var (
	echo  = Origin{Method: "tools/call", Name: "echo"}
	list  = Origin{Method: "tools/list"}
	greet = Origin{Method: "prompts/get", Name: "greeting"}
)

// op is one step of a table test: record (or, with task, record a task)
// then optionally advance the clock.
type op struct {
	session, id string
	o           Origin
	task        bool
	advance     time.Duration
	forget      string
}

type want struct {
	session, id string
	task        bool
	o           Origin
	err         error
}

func TestStore(t *testing.T) {
	small := Options{MaxRequests: 4, MaxRequestsPerSession: 2, MaxTasks: 2, MaxTasksPerSession: 1, Shards: 1,
		RequestTTL: time.Minute, TaskTTL: time.Hour}
	tests := []struct {
		name string
		opts Options
		ops  []op
		want []want
	}{
		{"found", small, []op{{session: "s", id: "1", o: echo}},
			[]want{{"s", "1", false, echo, nil}}},
		{"other session", small, []op{{session: "s", id: "1", o: echo}},
			[]want{{"t", "1", false, Origin{}, ErrUnknown}}},
		{"number and string ids differ", small, []op{{session: "s", id: "1", o: echo}},
			[]want{{"s", `"1"`, false, Origin{}, ErrUnknown}}},
		{"escaped string id equals plain", small, []op{{session: "s", id: `"\u0061b"`, o: echo}},
			[]want{{"s", `"ab"`, false, echo, nil}}},
		{"same origin twice", small, []op{{session: "s", id: "1", o: echo}, {session: "s", id: "1", o: echo}},
			[]want{{"s", "1", false, echo, nil}}},
		{"reused id is ambiguous", small, []op{{session: "s", id: "1", o: echo}, {session: "s", id: "1", o: list}},
			[]want{{"s", "1", false, Origin{}, ErrAmbiguous}}},
		{"reused id stays ambiguous", small, []op{{session: "s", id: "1", o: echo}, {session: "s", id: "1", o: list}, {session: "s", id: "1", o: echo}},
			[]want{{"s", "1", false, Origin{}, ErrAmbiguous}}},
		{"expired", small, []op{{session: "s", id: "1", o: echo, advance: time.Minute}},
			[]want{{"s", "1", false, Origin{}, ErrUnknown}}},
		{"not yet expired", small, []op{{session: "s", id: "1", o: echo, advance: time.Minute - 1}},
			[]want{{"s", "1", false, echo, nil}}},
		{"reuse after expiry is not ambiguous", small, []op{{session: "s", id: "1", o: echo, advance: time.Minute}, {session: "s", id: "1", o: list}},
			[]want{{"s", "1", false, list, nil}}},
		{"refresh extends life", small, []op{{session: "s", id: "1", o: echo, advance: 50 * time.Second}, {session: "s", id: "1", o: echo, advance: 50 * time.Second}},
			[]want{{"s", "1", false, echo, nil}}},
		{"per-session cap evicts the session's oldest", small,
			[]op{{session: "s", id: "1", o: echo}, {session: "t", id: "1", o: greet}, {session: "s", id: "2", o: echo}, {session: "s", id: "3", o: echo}},
			[]want{{"s", "1", false, Origin{}, ErrUnknown}, {"s", "2", false, echo, nil}, {"s", "3", false, echo, nil}, {"t", "1", false, greet, nil}}},
		{"global cap evicts the oldest", small,
			[]op{{session: "a", id: "1", o: echo}, {session: "b", id: "1", o: echo}, {session: "c", id: "1", o: echo}, {session: "d", id: "1", o: echo}, {session: "e", id: "1", o: echo}},
			[]want{{"a", "1", false, Origin{}, ErrUnknown}, {"b", "1", false, echo, nil}, {"e", "1", false, echo, nil}}},
		{"task found", small, []op{{session: "s", id: "t-1", o: echo, task: true}},
			[]want{{"s", "t-1", true, echo, nil}, {"s", `"t-1"`, false, Origin{}, ErrUnknown}}},
		{"task of another session", small, []op{{session: "s", id: "t-1", o: echo, task: true}},
			[]want{{"", "t-1", true, Origin{}, ErrUnknown}}},
		{"task sessionless", small, []op{{session: "", id: "t-1", o: echo, task: true}},
			[]want{{"", "t-1", true, echo, nil}}},
		{"task per-session cap", small, []op{{session: "s", id: "t-1", o: echo, task: true}, {session: "s", id: "t-2", o: greet, task: true}},
			[]want{{"s", "t-1", true, Origin{}, ErrUnknown}, {"s", "t-2", true, greet, nil}}},
		{"task TTL is its own", small, []op{{session: "s", id: "t-1", o: echo, task: true}, {session: "s", id: "1", o: echo, advance: 2 * time.Minute}},
			[]want{{"s", "t-1", true, echo, nil}, {"s", "1", false, Origin{}, ErrUnknown}}},
		{"forget session", small, []op{{session: "s", id: "1", o: echo}, {session: "s", id: "t", o: echo, task: true}, {session: "u", id: "1", o: echo, forget: "s"}},
			[]want{{"s", "1", false, Origin{}, ErrUnknown}, {"s", "t", true, Origin{}, ErrUnknown}, {"u", "1", false, echo, nil}}},
		{"invalid id", small, nil, []want{{"s", "{}", false, Origin{}, ErrInvalidID}, {"s", "", false, Origin{}, ErrInvalidID}, {"s", "", true, Origin{}, ErrInvalidID}}},
		{"too large", Options{MaxFieldBytes: 4}, nil, []want{{"s", `"12345"`, false, Origin{}, ErrTooLarge}, {"long-session", "1", false, Origin{}, ErrTooLarge}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			opts := tt.opts
			opts.Now = c.Now
			s := New(opts)
			for _, o := range tt.ops {
				var err error
				if o.task {
					err = s.RecordTask(context.Background(), o.session, o.id, o.o)
				} else {
					err = s.Record(context.Background(), o.session, []byte(o.id), o.o)
				}
				if err != nil {
					t.Fatalf("record %+v: %v", o, err)
				}
				c.Add(o.advance)
				if o.forget != "" {
					s.ForgetSession(context.Background(), o.forget)
				}
			}
			for _, w := range tt.want {
				var got Origin
				var err error
				if w.task {
					got, err = s.LookupTask(context.Background(), w.session, w.id)
				} else {
					got, err = s.Lookup(context.Background(), w.session, []byte(w.id))
				}
				if !errors.Is(err, w.err) || got != w.o {
					t.Errorf("lookup(%q, %q, task=%v) = %+v, %v; want %+v, %v", w.session, w.id, w.task, got, err, w.o, w.err)
				}
			}
		})
	}
}

func TestRecordTooLargeName(t *testing.T) {
	s := New(Options{MaxFieldBytes: 8})
	if err := s.Record(context.Background(), "s", []byte("1"), Origin{Method: "tools/call", Name: strings.Repeat("x", 9)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("Record = %v, want ErrTooLarge", err)
	}
	if err := s.RecordTask(context.Background(), "s", "t", Origin{Method: "tools/call", Name: strings.Repeat("x", 9)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("RecordTask = %v, want ErrTooLarge", err)
	}
	if st := s.Stats(); st.Requests != 0 || st.Tasks != 0 || st.Bytes != 0 {
		t.Fatalf("stats = %+v, want empty", st)
	}
}

// TestFairness: one session flooding the store keeps at most its cap, and
// other sessions' entries survive.
func TestFairness(t *testing.T) {
	s := New(Options{MaxRequests: 1000, MaxRequestsPerSession: 10, Shards: 1})
	for i := range 10 {
		if err := s.Record(context.Background(), fmt.Sprintf("victim-%d", i), []byte("1"), echo); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100_000 {
		if err := s.Record(context.Background(), "flood", fmt.Appendf(nil, "%d", i), list); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		if o, err := s.Lookup(context.Background(), fmt.Sprintf("victim-%d", i), []byte("1")); err != nil || o != echo {
			t.Fatalf("victim %d: %+v, %v", i, o, err)
		}
	}
	if st := s.Stats(); st.Requests != 20 {
		t.Fatalf("stats = %+v, want 20 requests", st)
	}
}

// TestBytesBound: the accounted bytes never exceed the budget, whatever the
// entry count cap.
func TestBytesBound(t *testing.T) {
	s := New(Options{MaxRequests: 1 << 20, MaxRequestsPerSession: 1 << 20, MaxBytes: 3 << 20, Shards: 4})
	name := strings.Repeat("n", 1000)
	for i := range 20_000 {
		if err := s.Record(context.Background(), fmt.Sprintf("session-%d", i%50), fmt.Appendf(nil, "%d", i), Origin{Method: "tools/call", Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Bytes > 2<<20 || st.Requests == 0 {
		t.Fatalf("stats = %+v, want bytes <= %d", st, 2<<20)
	}
}

func TestConcurrent(t *testing.T) {
	s := New(Options{MaxRequests: 1024, MaxRequestsPerSession: 64, Shards: 2})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			sess := fmt.Sprintf("s%d", g)
			for i := range 2000 {
				id := fmt.Appendf(nil, "%d", i)
				if err := s.Record(context.Background(), sess, id, echo); err != nil {
					t.Error(err)
					return
				}
				if o, err := s.Lookup(context.Background(), sess, id); err != nil && !errors.Is(err, ErrAmbiguous) || err == nil && o != echo {
					t.Errorf("lookup own fresh entry: %+v, %v", o, err)
					return
				}
				if i%100 == 0 {
					s.ForgetSession(context.Background(), sess)
					_ = s.Stats()
				}
			}
		})
	}
	wg.Wait()
}

// TestMemoryFlat records 100k requests (distinct sessions and ids) and
// checks that the live heap stays within the accounted bound, and does not
// grow between 100k and 200k requests.
func TestMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates")
	}
	opts := Options{MaxRequests: 8192}
	s := New(opts)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	fill := func(from, to int) {
		for i := from; i < to; i++ {
			sess := fmt.Sprintf("0b6e1c3a-7d2f-4e88-9c1d-%012d", i/8)
			if err := s.Record(context.Background(), sess, fmt.Appendf(nil, "%d", i), Origin{Method: "tools/call", Name: "get-weather"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := heap()
	fill(0, 100_000)
	at100k := heap()
	st := s.Stats()
	fill(100_000, 200_000)
	at200k := heap()
	runtime.KeepAlive(s)
	if st.Requests > opts.MaxRequests {
		t.Fatalf("requests = %d, cap %d", st.Requests, opts.MaxRequests)
	}
	grown := int64(at100k) - int64(before)
	t.Logf("entries %d, accounted %d bytes, heap +%d bytes after 100k, %+d more after 200k",
		st.Requests, st.Bytes, grown, int64(at200k)-int64(at100k))
	// The accounted bytes must cover the real heap (with 25% for map growth
	// slack), else the documented bound is a lie.
	if grown > int64(st.Bytes)*5/4 {
		t.Errorf("heap grew %d bytes for %d accounted bytes", grown, st.Bytes)
	}
	if more := int64(at200k) - int64(at100k); more > int64(st.Bytes)/4 {
		t.Errorf("heap grew %d more bytes from 100k to 200k requests; want flat", more)
	}
}
