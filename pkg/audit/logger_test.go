package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// blockingSink blocks every Write on release, ignoring its context: the
// worst sink there is. entered receives once per Write that started.
type blockingSink struct {
	entered chan struct{}
	release chan struct{}
	writes  atomic.Int64
	closed  atomic.Bool
}

func newBlockingSink() *blockingSink {
	return &blockingSink{entered: make(chan struct{}, 1<<16), release: make(chan struct{})}
}

func (s *blockingSink) Write(context.Context, *Event) error {
	s.entered <- struct{}{}
	<-s.release
	s.writes.Add(1)
	return nil
}

func (s *blockingSink) Close(context.Context) error { s.closed.Store(true); return nil }

// ctxSink blocks every Write until its context is done.
type ctxSink struct {
	entered chan struct{}
	closed  atomic.Bool
}

func (s *ctxSink) Write(ctx context.Context, _ *Event) error {
	s.entered <- struct{}{}
	<-ctx.Done()
	return ctx.Err()
}

func (s *ctxSink) Close(context.Context) error { s.closed.Store(true); return nil }

// errSink fails every Write.
type errSink struct {
	writes atomic.Int64
	closed atomic.Bool
}

var errDown = errors.New("collector down")

func (s *errSink) Write(context.Context, *Event) error { s.writes.Add(1); return errDown }
func (s *errSink) Close(context.Context) error         { s.closed.Store(true); return nil }

// dropCounter counts OnDrop calls by reason.
type dropCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (d *dropCounter) onDrop(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int{}
	}
	d.n[reason]++
}

func (d *dropCounter) get(reason string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[reason]
}

// A sink that blocks forever must not delay Emit: with the sink provably
// inside a Write, thousands of Emits all return; exactly the queue's
// capacity is accepted and the rest are dropped and reported. Close then
// returns by its deadline although the sink ignores it.
func TestEmitDoesNotWaitForABlockedSink(t *testing.T) {
	const queue, n = 64, 5000
	sink := newBlockingSink()
	var drops dropCounter
	l := NewLogger(sink, Options{QueueSize: queue, OnDrop: drops.onDrop})
	l.Start()

	if !l.Emit(fullEvent()) {
		t.Fatal("first Emit dropped")
	}
	<-sink.entered // the goroutine holds event 1 and is stuck in Write

	accepted := 0
	for range n {
		if l.Emit(fullEvent()) {
			accepted++
		}
	}
	// Every Emit has returned while the sink is still blocked: nothing has
	// released it, and it has finished no write.
	if got := sink.writes.Load(); got != 0 {
		t.Fatalf("sink finished %d writes, want 0 (it is blocked)", got)
	}
	if accepted != queue {
		t.Errorf("accepted %d, want the queue's capacity %d", accepted, queue)
	}
	if got, want := l.Dropped(), uint64(n-queue); got != want {
		t.Errorf("Dropped() = %d, want emitted - capacity - in flight = %d", got, want)
	}
	if got := drops.get(DropQueueFull); got != n-queue {
		t.Errorf("OnDrop(queue_full) called %d times, want %d", got, n-queue)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := l.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the deadline's error", err)
	}
	if got := sink.writes.Load(); got != 0 {
		t.Fatalf("sink finished %d writes before release", got)
	}
	if l.Emit(fullEvent()) {
		t.Error("Emit after Close was accepted")
	}

	// Let the stuck write finish: the goroutine drops what is queued,
	// closes the sink and ends (goleak checks it ended).
	close(sink.release)
	<-l.done
	if !sink.closed.Load() {
		t.Error("sink not closed after the abandoned goroutine ended")
	}
	if got, want := l.Written()+l.Dropped(), uint64(1+n+1); got != want {
		t.Errorf("written %d + dropped %d = %d, want every Emit = %d", l.Written(), l.Dropped(), got, want)
	}
	if got := drops.get(DropShutdown); got != queue {
		t.Errorf("shutdown drops %d, want the %d still queued", got, queue)
	}
	if got := drops.get(DropClosed); got != 1 {
		t.Errorf("closed drops %d, want 1", got)
	}
}

// A sink that honours its context is cancelled at Close's deadline, and
// Close closes it before returning.
func TestCloseCancelsAWriteByTheDeadline(t *testing.T) {
	sink := &ctxSink{entered: make(chan struct{}, 16)}
	l := NewLogger(sink, Options{QueueSize: 8, WriteTimeout: time.Hour})
	l.Start()
	for range 5 {
		l.Emit(fullEvent())
	}
	<-sink.entered
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the deadline's error", err)
	}
	<-l.done
	if !sink.closed.Load() {
		t.Error("sink not closed")
	}
	if l.Written() != 0 || l.Dropped() != 5 {
		t.Errorf("written %d dropped %d, want 0 and 5", l.Written(), l.Dropped())
	}
}

// A sink that always fails costs Emit nothing more: every event is either
// queued or dropped at once, and each queued one is dropped as a sink
// error and reported.
func TestEmitWithAFailingSink(t *testing.T) {
	const n = 10000
	sink := &errSink{}
	var drops dropCounter
	var errCount atomic.Int64
	l := NewLogger(sink, Options{QueueSize: 128, OnDrop: drops.onDrop,
		OnError: func(err error) {
			if errors.Is(err, errDown) {
				errCount.Add(1)
			}
		}})
	l.Start()
	accepted := 0
	for range n {
		if l.Emit(fullEvent()) {
			accepted++
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if l.Written() != 0 || l.Dropped() != n {
		t.Errorf("written %d dropped %d, want 0 and %d", l.Written(), l.Dropped(), n)
	}
	if got := drops.get(DropSinkError); got != accepted || int64(got) != sink.writes.Load() {
		t.Errorf("sink_error drops %d, want the %d accepted, each written once (%d)", got, accepted, sink.writes.Load())
	}
	if got := drops.get(DropQueueFull); got != n-accepted {
		t.Errorf("queue_full drops %d, want %d", got, n-accepted)
	}
	if errCount.Load() != int64(accepted) {
		t.Errorf("OnError called %d times, want %d", errCount.Load(), accepted)
	}
	if !sink.closed.Load() {
		t.Error("sink not closed")
	}
}

// Events reach the sink whole and in order, and Close flushes the queue.
func TestLoggerWritesInOrder(t *testing.T) {
	var buf bytes.Buffer
	l := NewLogger(NewWriterSink(&buf, FormatJSON, Product{}), Options{QueueSize: 256})
	// Emitted before Start: they wait in the queue.
	for i := range 200 {
		e := fullEvent()
		e.JSONRPCID = strconv.Itoa(i)
		if !l.Emit(e) {
			t.Fatalf("Emit %d dropped", i)
		}
	}
	l.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&buf)
	i := 0
	for ; sc.Scan(); i++ {
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if e.JSONRPCID != strconv.Itoa(i) {
			t.Fatalf("line %d has id %s", i, e.JSONRPCID)
		}
	}
	if i != 200 || l.Written() != 200 || l.Dropped() != 0 {
		t.Errorf("%d lines, written %d, dropped %d; want 200, 200, 0", i, l.Written(), l.Dropped())
	}
	if err := l.Close(ctx); !errors.Is(err, ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

// Close without Start drops what was queued, counted.
func TestCloseWithoutStart(t *testing.T) {
	sink := &errSink{}
	l := NewLogger(sink, Options{QueueSize: 4})
	for range 6 {
		l.Emit(fullEvent())
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l.Dropped() != 6 || sink.writes.Load() != 0 || !sink.closed.Load() {
		t.Errorf("dropped %d, writes %d, closed %v; want 6, 0, true", l.Dropped(), sink.writes.Load(), sink.closed.Load())
	}
}

// Emit racing Close loses no event from the count: every Emit is written
// or dropped, none vanishes in the queue (run with -race).
func TestEmitRacingClose(t *testing.T) {
	var sink countSink
	l := NewLogger(&sink, Options{QueueSize: 16})
	l.Start()
	const workers, each = 4, 2000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				l.Emit(Event{Method: "tools/call"})
			}
		})
	}
	time.Sleep(time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := l.Written() + l.Dropped(); got != workers*each {
		t.Errorf("written %d + dropped %d = %d, want %d", l.Written(), l.Dropped(), got, workers*each)
	}
	if uint64(sink.n.Load()) != l.Written() {
		t.Errorf("sink saw %d, Written() = %d", sink.n.Load(), l.Written())
	}
}

type countSink struct{ n atomic.Int64 }

func (s *countSink) Write(context.Context, *Event) error { s.n.Add(1); return nil }
func (s *countSink) Close(context.Context) error         { return nil }

// Emit allocates nothing, queued or dropped: the event is copied into the
// channel, and encoding happens on the Logger's goroutine.
func TestEmitAllocs(t *testing.T) {
	const runs = 1000
	e := fullEvent()
	l := NewLogger(&countSink{}, Options{QueueSize: 4 * runs})
	if a := testing.AllocsPerRun(runs, func() { l.Emit(e) }); a != 0 {
		t.Errorf("Emit (queued) allocates %v per call, want 0", a)
	}
	full := NewLogger(&countSink{}, Options{QueueSize: 1})
	full.Emit(e)
	if a := testing.AllocsPerRun(runs, func() { full.Emit(e) }); a != 0 {
		t.Errorf("Emit (dropped) allocates %v per call, want 0", a)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := full.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkEmit is the cost a request pays: Emit of a full event into a
// running Logger whose sink does nothing. baseline is a bare channel send
// of the same event, what Emit cannot beat.
func BenchmarkEmit(b *testing.B) {
	e := fullEvent()
	b.Run("baseline_chan_send", func(b *testing.B) {
		ch := make(chan Event, 1024)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range ch {
			}
		}()
		b.ReportAllocs()
		for b.Loop() {
			select {
			case ch <- e:
			default:
			}
		}
		close(ch)
		<-done
	})
	b.Run("logger", func(b *testing.B) {
		l := NewLogger(&countSink{}, Options{QueueSize: 1024})
		l.Start()
		b.ReportAllocs()
		for b.Loop() {
			l.Emit(e)
		}
		b.StopTimer()
		_ = l.Close(context.Background())
		b.ReportMetric(float64(l.Dropped())/float64(b.N), "drops/op")
	})
	b.Run("logger_parallel", func(b *testing.B) {
		l := NewLogger(&countSink{}, Options{QueueSize: 1024})
		l.Start()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Emit(e)
			}
		})
		b.StopTimer()
		_ = l.Close(context.Background())
	})
}

// BenchmarkEncode is the cost on the Logger's goroutine, per format.
func BenchmarkEncode(b *testing.B) {
	e := fullEvent()
	for _, f := range []Format{FormatJSON, FormatOCSF} {
		b.Run(string(f), func(b *testing.B) {
			enc := Encoder{Format: f}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.Encode(&e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Start after Close does not start a goroutine that would write to a
// closed sink.
func TestStartAfterClose(t *testing.T) {
	sink := &countSink{}
	l := NewLogger(sink, Options{})
	if err := l.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	l.Start() // must neither panic nor leak (goleak)
	if l.Emit(fullEvent()) || sink.n.Load() != 0 {
		t.Error("Emit after Close accepted")
	}
}
