package audit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The reasons an event is dropped, passed to [Options.OnDrop]: the label
// values of mcp_extproc_audit_dropped_total.
const (
	// DropQueueFull: Emit found the queue full (the sink is slower than
	// the traffic, or stuck).
	DropQueueFull = "queue_full"
	// DropClosed: Emit was called after Close.
	DropClosed = "closed"
	// DropSinkError: the sink returned an error for the event.
	DropSinkError = "sink_error"
	// DropShutdown: the event was still queued when Close's deadline
	// passed.
	DropShutdown = "shutdown"
)

// Defaults for [Options].
const (
	DefaultQueueSize    = 1024
	DefaultWriteTimeout = 5 * time.Second
)

// ErrClosed is returned by a second Close.
var ErrClosed = errors.New("audit: logger closed")

// Options tune a [Logger]. The zero value is usable.
type Options struct {
	// QueueSize is how many events may wait for the sink; beyond it Emit
	// drops. 0 means DefaultQueueSize.
	QueueSize int
	// WriteTimeout bounds each Sink.Write (through its context). 0 means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// OnDrop, if set, is called once for each dropped event with one of
	// the Drop* reasons: on Emit's goroutine for DropQueueFull and
	// DropClosed, on the Logger's for the others. It must be quick and
	// must not block (a Prometheus counter's Inc).
	OnDrop func(reason string)
	// OnError, if set, is called on the Logger's goroutine with each error
	// a sink returns (each such event is also dropped, DropSinkError). A
	// sink that is down errs for every event: rate-limit what this logs.
	OnError func(error)
}

// Logger is the non-blocking front of a [Sink]: [Logger.Emit] puts the
// event on a bounded queue, or drops and counts it when the queue is full,
// and never waits. One goroutine, started by [Logger.Start] and stopped by
// [Logger.Close], takes events off the queue and writes them to the sink.
//
// Every emitted event is accounted for: once Close has returned and the
// goroutine has ended, Written() + Dropped() is the number of Emit calls.
type Logger struct {
	sink  Sink
	opts  Options
	queue chan Event

	// mu orders Emit against Close: Emit sends under the read lock, Close
	// sets closed under the write lock, so no event enters the queue after
	// the goroutine's final drain has begun.
	mu     sync.RWMutex
	closed bool

	startOnce sync.Once
	started   atomic.Bool
	stop      chan struct{} // closed by Close: drain and end
	done      chan struct{} // closed when the goroutine has ended
	// ctx is cancelled when Close's deadline passes: it aborts the write
	// in flight, and what is still queued is dropped.
	ctx    context.Context
	cancel context.CancelFunc
	// abandoned is set when Close returned before the goroutine ended; the
	// goroutine then closes the sink itself when the write it is stuck in
	// returns.
	abandoned atomic.Bool

	written atomic.Uint64
	dropped atomic.Uint64
}

// NewLogger returns a Logger writing to sink. Call Start to begin writing
// and Close to end; events emitted before Start wait in the queue.
func NewLogger(sink Sink, opts Options) *Logger {
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Logger{
		sink:   sink,
		opts:   opts,
		queue:  make(chan Event, opts.QueueSize),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		ctx:    ctx,
		cancel: cancel,
	}
}

// Start starts the goroutine that writes events. Calls after the first,
// and calls after Close, do nothing.
func (l *Logger) Start() {
	l.startOnce.Do(func() {
		// Under the read lock, so that Close sees started once it holds
		// the write lock, or Start sees closed.
		l.mu.RLock()
		defer l.mu.RUnlock()
		if l.closed {
			return
		}
		l.started.Store(true)
		go l.run()
	})
}

// Emit queues e for the sink and reports whether it was queued. It never
// blocks: when the queue is full, or the Logger is closed, e is dropped,
// counted, and reported to OnDrop. A zero e.Time is set to now.
//
// e is copied; the slices it refers to are read later, on the Logger's
// goroutine, and must not be changed after Emit.
func (l *Logger) Emit(e Event) bool {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		l.drop(DropClosed)
		return false
	}
	select {
	case l.queue <- e:
		l.mu.RUnlock()
		return true
	default:
		l.mu.RUnlock()
		l.drop(DropQueueFull)
		return false
	}
}

// Written is the number of events the sink accepted.
func (l *Logger) Written() uint64 { return l.written.Load() }

// Dropped is the number of events dropped, for any reason.
func (l *Logger) Dropped() uint64 { return l.dropped.Load() }

// Close stops taking events, writes what is queued, and closes the sink,
// all by ctx's deadline. When the deadline passes first, the write in
// flight is cancelled through its context, what is still queued is
// dropped (DropShutdown), and Close returns ctx's error without waiting
// further: a sink that ignores its context keeps the goroutine until its
// write returns, and the goroutine then closes the sink. Close never
// blocks past ctx.
func (l *Logger) Close(ctx context.Context) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	if !l.started.Load() {
		// Never started: nothing will write what is queued.
		l.cancel()
		for range len(l.queue) {
			<-l.queue
			l.drop(DropShutdown)
		}
		close(l.done)
		return l.closeSink(ctx)
	}
	select {
	case <-l.done:
		l.cancel()
		return l.closeSink(ctx)
	case <-ctx.Done():
	}
	l.abandoned.Store(true)
	l.cancel()
	select {
	case <-l.done:
		// The goroutine ended after all, now or before it saw abandoned:
		// if it did not close the sink, close it here.
		if l.abandoned.CompareAndSwap(true, false) {
			_ = l.closeSink(ctx)
		}
	default:
	}
	return fmt.Errorf("audit: close: queue not written by the deadline: %w", ctx.Err())
}

func (l *Logger) closeSink(ctx context.Context) error {
	if err := l.sink.Close(ctx); err != nil {
		return fmt.Errorf("audit: close sink: %w", err)
	}
	return nil
}

// run is the Logger's goroutine: it writes queued events until Close, then
// drains the queue.
func (l *Logger) run() {
	defer close(l.done)
	for {
		select {
		case e := <-l.queue:
			l.write(&e)
		case <-l.stop:
			l.drain()
			if l.abandoned.CompareAndSwap(true, false) {
				// Close has returned: release the sink with what time is
				// left, which is none; a sink's Close must cope.
				_ = l.sink.Close(l.ctx)
			}
			return
		}
	}
}

// drain writes what is queued (write drops it once Close's deadline has
// passed). Close set closed before stop was closed, so the queue only
// shrinks.
func (l *Logger) drain() {
	for {
		select {
		case e := <-l.queue:
			l.write(&e)
		default:
			return
		}
	}
}

// write writes e to the sink, or drops it when Close's deadline has
// passed.
func (l *Logger) write(e *Event) {
	if l.ctx.Err() != nil {
		l.drop(DropShutdown)
		return
	}
	ctx, cancel := context.WithTimeout(l.ctx, l.opts.WriteTimeout)
	err := l.sink.Write(ctx, e)
	cancel()
	if err != nil {
		l.drop(DropSinkError)
		if l.opts.OnError != nil {
			l.opts.OnError(err)
		}
		return
	}
	l.written.Add(1)
}

func (l *Logger) drop(reason string) {
	l.dropped.Add(1)
	if l.opts.OnDrop != nil {
		l.opts.OnDrop(reason)
	}
}
