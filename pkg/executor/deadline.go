package executor

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// clockDeadline is the context of a hook whose plugins cannot block: it
// has the hook's deadline, but arms no timer until something waits for it
// (Done), which nothing on the in-process path does; until then Err reads
// the clock. It behaves as context.WithDeadline(parent, deadline) would:
// Err is DeadlineExceeded once the deadline has passed, Done (armed late)
// is then already closed, and the contexts derived from it are cancelled
// with it.
//
// stop releases the timer if one was armed; the context must not be used
// after it (Run's invocations have all ended by then).
type clockDeadline struct {
	parent   context.Context
	done     <-chan struct{} // parent's: polled, where parent.Err walks the chain of contexts each time
	deadline time.Time
	clock    monoClock
	start    time.Duration // on clock
	limit    time.Duration // deadline - start
	once     sync.Once
	armed    atomic.Pointer[armedDeadline]
}

// armedDeadline is the real deadline context, once armed.
type armedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// init bounds parent by timeout, from the reading now of clock. A
// clockDeadline is used in place (it lives in the run's state) and not
// copied afterwards.
func (c *clockDeadline) init(parent context.Context, timeout time.Duration, clock monoClock, now time.Duration) {
	d := clock.at(now + timeout)
	if pd, ok := parent.Deadline(); ok && pd.Before(d) {
		d = pd
	}
	c.parent, c.done, c.deadline, c.clock, c.start, c.limit = parent, parent.Done(), d, clock, now, d.Sub(clock.at(now))
}

// arm returns the real deadline context, making it on first use.
func (c *clockDeadline) arm() *armedDeadline {
	c.once.Do(func() {
		ctx, cancel := context.WithDeadline(c.parent, c.deadline)
		c.armed.Store(&armedDeadline{ctx, cancel})
	})
	return c.armed.Load()
}

func (c *clockDeadline) stop() {
	if a := c.armed.Load(); a != nil {
		a.cancel()
	}
}

// Deadline implements context.Context.
func (c *clockDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

// Done implements context.Context: it arms the timer.
func (c *clockDeadline) Done() <-chan struct{} { return c.arm().ctx.Done() }

// Err implements context.Context: the parent's error, else
// DeadlineExceeded once the deadline has passed.
func (c *clockDeadline) Err() error { return c.errAt(c.clock.now()) }

// errAt is Err with the clock read already: now, on c's clock.
func (c *clockDeadline) errAt(now time.Duration) error {
	if a := c.armed.Load(); a != nil {
		return a.ctx.Err()
	}
	select {
	case <-c.done:
		return c.parent.Err()
	default:
	}
	if now-c.start >= c.limit {
		return context.DeadlineExceeded
	}
	return nil
}

// errAt is ctx.Err at now, a reading of the executor's clock the caller
// has anyway: a clockDeadline (on that clock) then does not read it again.
func errAt(ctx context.Context, now time.Duration) error {
	if c, ok := ctx.(*clockDeadline); ok {
		return c.errAt(now)
	}
	return ctx.Err()
}

// Value implements context.Context. Once armed it answers from the armed
// context, so that the contexts derived from it attach to that one's
// cancellation directly (no goroutine per derived context).
func (c *clockDeadline) Value(key any) any {
	if a := c.armed.Load(); a != nil {
		return a.ctx.Value(key)
	}
	return c.parent.Value(key)
}

// monoClock reads the monotonic clock alone: a reading is the time since
// its epoch. time.Now reads the wall clock as well, which costs as much
// again (each read about 30 ns on a virtual machine's clock, several per
// plugin call) and which no duration or deadline here needs.
type monoClock struct{ epoch time.Time }

func newMonoClock() monoClock { return monoClock{epoch: time.Now()} }

// now is the current reading.
func (c monoClock) now() time.Duration { return time.Since(c.epoch) }

// at is the time of reading d, with its monotonic reading.
func (c monoClock) at(d time.Duration) time.Time { return c.epoch.Add(d) }
