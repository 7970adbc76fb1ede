package executor

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

type ctxKey struct{}

// A clockDeadline behaves as context.WithDeadline: done once its deadline
// passes, whether or not anything armed it, with a Done that agrees, a
// Cause that agrees, and derived contexts cancelled with it.
func TestClockDeadline(t *testing.T) {
	parent := context.WithValue(context.Background(), ctxKey{}, "v")
	clock := newMonoClock()

	t.Run("unarmed until the deadline", func(t *testing.T) {
		// A cancellable parent, whose own cause context.Cause would find.
		p, cancel := context.WithCancel(parent)
		defer cancel()
		var c clockDeadline
		c.init(p, 30*time.Millisecond, clock, clock.now())
		defer c.stop()
		if err := c.Err(); err != nil {
			t.Fatalf("Err before the deadline: %v", err)
		}
		if c.Value(ctxKey{}) != "v" {
			t.Error("the parent's value is lost")
		}
		if d, ok := c.Deadline(); !ok || time.Until(d) > 30*time.Millisecond {
			t.Errorf("Deadline = %v, %v", d, ok)
		}
		if c.armed.Load() != nil {
			t.Error("armed without anything waiting")
		}
		time.Sleep(40 * time.Millisecond)
		if err := c.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err after the deadline: %v", err)
		}
		if err := context.Cause(&c); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Cause = %v", err)
		}
		select {
		case <-c.Done():
		default:
			t.Error("Done armed after the deadline is not closed")
		}
	})

	t.Run("armed by a waiter", func(t *testing.T) {
		var c clockDeadline
		c.init(parent, 30*time.Millisecond, clock, clock.now())
		defer c.stop()
		before := runtime.NumGoroutine()
		child, cancel := context.WithCancel(&c)
		defer cancel()
		if n := runtime.NumGoroutine(); n > before {
			t.Errorf("deriving a context started %d goroutines", n-before)
		}
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a context derived from it was not cancelled at its deadline")
		}
		if !errors.Is(child.Err(), context.DeadlineExceeded) || !errors.Is(c.Err(), context.DeadlineExceeded) {
			t.Errorf("errors %v, %v", child.Err(), c.Err())
		}
		if child.Value(ctxKey{}) != "v" {
			t.Error("the parent's value is lost")
		}
	})

	t.Run("parent cancelled", func(t *testing.T) {
		p, cancel := context.WithCancel(parent)
		var c clockDeadline
		c.init(p, time.Hour, clock, clock.now())
		defer c.stop()
		cancel()
		if !errors.Is(c.Err(), context.Canceled) {
			t.Errorf("Err = %v", c.Err())
		}
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Error("Done not closed after the parent's cancellation")
		}
	})

	t.Run("parent's earlier deadline", func(t *testing.T) {
		p, cancel := context.WithTimeout(parent, time.Minute)
		defer cancel()
		pd, _ := p.Deadline()
		var c clockDeadline
		c.init(p, time.Hour, clock, clock.now())
		defer c.stop()
		if d, _ := c.Deadline(); !d.Equal(pd) {
			t.Errorf("Deadline = %v, want the parent's %v", d, pd)
		}
	})

	t.Run("stop releases the timer", func(t *testing.T) {
		var c clockDeadline
		c.init(parent, time.Hour, clock, clock.now())
		done := c.Done()
		c.stop()
		select {
		case <-done:
		default:
			t.Error("stop left the armed context running")
		}
	})
}
