package reconnect

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeSleep hands every requested delay to the test, which lets the
// supervisor go on by receiving from ch.
type fakeSleep struct{ ch chan time.Duration }

func newFakeSleep() *fakeSleep { return &fakeSleep{ch: make(chan time.Duration)} }

func (f *fakeSleep) Sleep(ctx context.Context, d time.Duration) error {
	select {
	case f.ch <- d:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next receives the next requested delay.
func (f *fakeSleep) next(t *testing.T) time.Duration {
	t.Helper()
	select {
	case d := <-f.ch:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("supervisor never slept")
		return 0
	}
}

// script is a Connect function whose outcome the test sets.
type script struct {
	calls atomic.Int64
	fail  atomic.Bool
	gate  chan struct{} // if non-nil, Connect blocks until it is closed
	mu    sync.Mutex
	gens  []uint64
}

var errRefused = errors.New("connection refused")

func (s *script) Connect(ctx context.Context, gen uint64) error {
	s.calls.Add(1)
	s.mu.Lock()
	s.gens = append(s.gens, gen)
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.fail.Load() {
		return errRefused
	}
	return nil
}

func (s *script) setGate(g chan struct{}) {
	s.mu.Lock()
	s.gate = g
	s.mu.Unlock()
}

// transitions records state changes.
type transitions struct {
	mu  sync.Mutex
	got [][2]State
	ch  chan [2]State
}

func newTransitions() *transitions { return &transitions{ch: make(chan [2]State, 100)} }

func (tr *transitions) On(from, to State) {
	tr.mu.Lock()
	tr.got = append(tr.got, [2]State{from, to})
	tr.mu.Unlock()
	tr.ch <- [2]State{from, to}
}

func (tr *transitions) wait(t *testing.T, from, to State) {
	t.Helper()
	select {
	case got := <-tr.ch:
		if got != [2]State{from, to} {
			t.Fatalf("transition %v→%v, want %v→%v", got[0], got[1], from, to)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("no transition %v→%v", from, to)
	}
}

func maxRand(n int64) int64 { return n - 1 }

// waitCount waits until c reaches want.
func waitCount(t *testing.T, c *atomic.Int64, want int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for c.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("count = %d, want %d", c.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSupervisorNotStarted(t *testing.T) {
	s := New(Config{Connect: (&script{}).Connect})
	defer s.Close()
	if _, err := s.Acquire(context.Background()); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Acquire before Start = %v, want ErrNotStarted", err)
	}
	if err := s.Rebuild(context.Background(), 0); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("Rebuild before Start = %v, want ErrNotStarted", err)
	}
	if s.State() != Connecting {
		t.Fatalf("State = %v, want connecting", s.State())
	}
}

func TestSupervisorConnects(t *testing.T) {
	sc := &script{}
	tr := newTransitions()
	s := New(Config{Connect: sc.Connect, Attempts: 3, OnStateChange: tr.On})
	s.Start(context.Background())
	defer s.Close()

	gen, err := s.Acquire(context.Background())
	if err != nil || gen != 1 {
		t.Fatalf("Acquire = %d, %v; want 1, nil", gen, err)
	}
	tr.wait(t, Connecting, Ready)
	if s.State() != Ready || s.Epoch() != 1 {
		t.Fatalf("State, Gen = %v, %d; want ready, 1", s.State(), s.Epoch())
	}
	// A second Start is a no-op.
	s.Start(context.Background())
	if n := sc.calls.Load(); n != 1 {
		t.Fatalf("Connect called %d times, want 1", n)
	}
}

func TestSupervisorRebuildSingleFlight(t *testing.T) {
	sc := &script{}
	var rebuilds atomic.Int64
	s := New(Config{Connect: sc.Connect, Attempts: 3, OnRebuild: func() { rebuilds.Add(1) }})
	s.Start(context.Background())
	defer s.Close()
	if _, err := s.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Every caller saw generation 1 fail; the rebuild blocks until all of
	// them have called Rebuild.
	gate := make(chan struct{})
	sc.setGate(gate)
	const callers = 50
	var started, done sync.WaitGroup
	started.Add(callers)
	done.Add(callers)
	errs := make(chan error, callers)
	for range callers {
		go func() {
			defer done.Done()
			started.Done()
			errs <- s.Rebuild(context.Background(), 1)
		}()
	}
	started.Wait()
	// Callers blocked in Acquire join the same round.
	acq := make(chan uint64, 1)
	go func() {
		g, _ := s.Acquire(context.Background())
		acq <- g
	}()
	close(gate)
	done.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Rebuild = %v", err)
		}
	}
	if g := <-acq; g != 2 {
		t.Errorf("Acquire during rebuild = gen %d, want 2", g)
	}
	if n := sc.calls.Load(); n != 2 {
		t.Errorf("Connect called %d times, want 2 (initial + one rebuild)", n)
	}
	if n := rebuilds.Load(); n != 1 {
		t.Errorf("OnRebuild called %d times, want 1", n)
	}
	if s.Epoch() != 2 {
		t.Errorf("Gen = %d, want 2", s.Epoch())
	}
	sc.mu.Lock()
	if len(sc.gens) != 2 || sc.gens[0] != 1 || sc.gens[1] != 2 {
		t.Errorf("Connect gens = %v, want [1 2]", sc.gens)
	}
	sc.mu.Unlock()

	// A report about an older generation does not rebuild again.
	if err := s.Rebuild(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if n := sc.calls.Load(); n != 2 {
		t.Errorf("stale Rebuild connected again (%d calls)", n)
	}
}

func TestSupervisorBreaker(t *testing.T) {
	sc := &script{}
	sl := newFakeSleep()
	tr := newTransitions()
	var failed atomic.Int64
	s := New(Config{
		Connect:         sc.Connect,
		Attempts:        3,
		Backoff:         Backoff{Base: 100 * time.Millisecond, Max: 400 * time.Millisecond, Rand: maxRand},
		Sleep:           sl.Sleep,
		OnStateChange:   tr.On,
		OnAttemptFailed: func(int, error) { failed.Add(1) },
	})
	s.Start(context.Background())
	defer s.Close()
	if _, err := s.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr.wait(t, Connecting, Ready)

	// The peer goes away: one rebuild round of 3 attempts, spaced by the
	// backoff ceilings (Rand draws the top of the range).
	sc.fail.Store(true)
	res := make(chan error, 1)
	go func() { res <- s.Rebuild(context.Background(), 1) }()
	for _, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		if d := sl.next(t); d != want {
			t.Fatalf("rebuild slept %v, want %v", d, want)
		}
	}
	if err := <-res; !errors.Is(err, ErrOpen) {
		t.Fatalf("failed Rebuild = %v, want ErrOpen", err)
	}
	tr.wait(t, Ready, Down)
	if n := sc.calls.Load(); n != 4 {
		t.Fatalf("Connect called %d times, want 1 + 3", n)
	}

	// Open circuit: callers fail at once, no new rounds start.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if _, err := s.Acquire(ctx); !errors.Is(err, ErrOpen) {
		t.Fatalf("Acquire while down = %v, want ErrOpen", err)
	}
	if err := s.Rebuild(ctx, 1); !errors.Is(err, ErrOpen) {
		t.Fatalf("Rebuild while down = %v, want ErrOpen", err)
	}
	if s.State() != Down {
		t.Fatalf("State = %v, want down", s.State())
	}

	// The background loop keeps trying with capped backoff; each failed
	// attempt is reported before the loop sleeps again, so flipping the
	// flag after the report decides the next attempt.
	for i, want := range []time.Duration{400 * time.Millisecond, 400 * time.Millisecond} {
		if d := sl.next(t); d != want {
			t.Fatalf("loop sleep %d = %v, want %v", i, d, want)
		}
		waitCount(t, &failed, int64(4+i))
	}
	sc.fail.Store(false)
	if d := sl.next(t); d != 400*time.Millisecond {
		t.Fatalf("loop slept %v, want 400ms", d)
	}
	tr.wait(t, Down, Ready)
	gen, err := s.Acquire(context.Background())
	if err != nil || gen != 2 {
		t.Fatalf("Acquire after recovery = %d, %v; want 2, nil", gen, err)
	}
	if n := failed.Load(); n != 5 {
		t.Errorf("OnAttemptFailed called %d times, want 5", n)
	}
}

func TestSupervisorInitialFailureThenRecovery(t *testing.T) {
	sc := &script{}
	sc.fail.Store(true)
	sl := newFakeSleep()
	tr := newTransitions()
	var connected atomic.Int64
	s := New(Config{Connect: sc.Connect, Attempts: 2, Sleep: sl.Sleep, OnStateChange: tr.On,
		OnConnected: func() { connected.Add(1) }})
	s.Start(context.Background())
	defer s.Close()
	sl.next(t) // between attempts 1 and 2
	tr.wait(t, Connecting, Down)
	if _, err := s.Acquire(context.Background()); !errors.Is(err, ErrOpen) {
		t.Fatalf("Acquire = %v, want ErrOpen", err)
	}
	sc.fail.Store(false)
	sl.next(t) // the loop's first sleep; its Connect now succeeds
	tr.wait(t, Down, Ready)
	if g, err := s.Acquire(context.Background()); err != nil || g != 1 {
		t.Fatalf("Acquire = %d, %v; want 1, nil", g, err)
	}
	waitCount(t, &connected, 1) // the background loop's connection too
}

func TestSupervisorWaitersHonourContext(t *testing.T) {
	sc := &script{gate: make(chan struct{})}
	s := New(Config{Connect: sc.Connect})
	s.Start(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with cancelled ctx = %v, want context.Canceled", err)
	}
	// Close cancels the blocked Connect and wakes waiters.
	res := make(chan error, 1)
	go func() {
		_, err := s.Acquire(context.Background())
		res <- err
	}()
	s.Close()
	if err := <-res; !errors.Is(err, ErrStopped) {
		t.Fatalf("Acquire across Close = %v, want ErrStopped", err)
	}
	if err := s.Rebuild(context.Background(), 0); !errors.Is(err, ErrStopped) {
		t.Fatalf("Rebuild after Close = %v, want ErrStopped", err)
	}
}

func TestSupervisorParentContext(t *testing.T) {
	sc := &script{}
	sc.fail.Store(true)
	sl := newFakeSleep()
	s := New(Config{Connect: sc.Connect, Sleep: sl.Sleep})
	ctx, cancel := context.WithCancel(context.Background())
	s.Start(ctx)
	sl.next(t) // down, looping
	cancel()
	s.Close() // returns: the loop saw ctx end
	if _, err := s.Acquire(context.Background()); !errors.Is(err, ErrStopped) {
		t.Fatalf("Acquire = %v, want ErrStopped", err)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Connecting: "connecting", Ready: "ready", Down: "down", State(9): "State(9)"} {
		if got := s.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int32(s), got, want)
		}
	}
}

func TestSupervisorLoopNeverSpins(t *testing.T) {
	sc := &script{}
	sc.fail.Store(true)
	sl := newFakeSleep()
	s := New(Config{Connect: sc.Connect, Backoff: Backoff{Max: 4 * time.Millisecond, Rand: maxRand}, Sleep: sl.Sleep})
	s.Start(context.Background())
	defer s.Close()
	for i, want := range []time.Duration{MinLoopDelay, 2 * MinLoopDelay, 4 * MinLoopDelay, 4 * MinLoopDelay} {
		if d := sl.next(t); d != want {
			t.Fatalf("loop sleep %d = %v, want %v", i, d, want)
		}
	}
}

// Invalidate starts one rebuild without waiting; Usable is false while it
// runs; a stale epoch or a second report starts nothing.
func TestSupervisorInvalidate(t *testing.T) {
	sc := &script{}
	var connected atomic.Int64
	s := New(Config{Connect: sc.Connect, OnConnected: func() { connected.Add(1) }})
	if s.Usable() || s.Invalidate(0) {
		t.Fatal("usable or invalidated before Start")
	}
	s.Start(context.Background())
	defer s.Close()
	if _, err := s.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !s.Usable() {
		t.Fatal("not usable once ready")
	}
	gate := make(chan struct{})
	sc.setGate(gate)
	if !s.Invalidate(1) {
		t.Fatal("Invalidate(current epoch) started no rebuild")
	}
	if s.Usable() || s.Invalidate(1) {
		t.Fatal("usable, or a second rebuild started, while rebuilding")
	}
	if s.State() != Ready {
		t.Fatalf("State = %v while rebuilding, want ready (callers wait)", s.State())
	}
	close(gate)
	if _, err := s.Acquire(context.Background()); err != nil || s.Epoch() != 2 || !s.Usable() {
		t.Fatalf("after the rebuild: %v, epoch %d, usable %v", err, s.Epoch(), s.Usable())
	}
	if s.Invalidate(1) {
		t.Fatal("a stale epoch started a rebuild")
	}
	if n := sc.calls.Load(); n != 2 {
		t.Fatalf("Connect called %d times, want 2", n)
	}
	waitCount(t, &connected, 2) // the rebuild too, though no state changed
}
