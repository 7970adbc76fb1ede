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
	start    time.Time     // with its monotonic reading: time.Since reads one clock, time.Now two
	limit    time.Duration // deadline - start
	once     sync.Once
	armed    atomic.Pointer[armedDeadline]
}

// armedDeadline is the real deadline context, once armed.
type armedDeadline struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// init bounds parent by timeout. A clockDeadline is used in place (it
// lives in the run's state) and not copied afterwards.
func (c *clockDeadline) init(parent context.Context, timeout time.Duration) {
	now := time.Now()
	d := now.Add(timeout)
	if pd, ok := parent.Deadline(); ok && pd.Before(d) {
		d = pd
	}
	c.parent, c.done, c.deadline, c.start, c.limit = parent, parent.Done(), d, now, d.Sub(now)
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
func (c *clockDeadline) Err() error { return c.errAt(time.Now()) }

// errAt is Err with the clock read already: now.
func (c *clockDeadline) errAt(now time.Time) error {
	if a := c.armed.Load(); a != nil {
		return a.ctx.Err()
	}
	select {
	case <-c.done:
		return c.parent.Err()
	default:
	}
	if now.Sub(c.start) >= c.limit {
		return context.DeadlineExceeded
	}
	return nil
}

// errAt is ctx.Err at now, a clock reading the caller has anyway: a
// clockDeadline then does not read the clock again.
func errAt(ctx context.Context, now time.Time) error {
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
