// Package reconnect keeps one logical connection alive: exponential backoff
// with full jitter, a single-flight rebuild shared by every caller that saw
// the connection fail, and a circuit breaker that fails callers at once while
// the peer is down and a background loop brings it back.
//
// The package knows nothing about what a connection is: the caller supplies a
// Connect function. pkg/pluginclient uses it for MCP plugin sessions.
package reconnect

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff computes exponential delays with full jitter: the delay before
// retry n (counted from 0) is drawn uniformly from [0, Ceiling(n)], where
// Ceiling(n) = min(Max, Base·2ⁿ). See "Exponential Backoff And Jitter"
// (AWS Architecture Blog, 2015).
//
// The zero Backoff has no delay.
type Backoff struct {
	// Base is the ceiling of the first delay.
	Base time.Duration
	// Max caps every ceiling; zero or negative means no cap.
	Max time.Duration
	// Rand returns a uniform value in [0, n) for n > 0. Nil means
	// math/rand/v2.Int64N. Tests inject a deterministic source.
	Rand func(n int64) int64
}

// Ceiling returns the largest delay that retry n can draw: min(Max, Base·2ⁿ),
// without overflowing for large n. It is 0 when Base is not positive.
func (b Backoff) Ceiling(n int) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	if n < 0 {
		n = 0
	}
	limit := b.Max
	if limit <= 0 {
		limit = time.Duration(1<<63 - 1)
	}
	c := b.Base
	for range n {
		if c >= limit/2 {
			return limit
		}
		c *= 2
	}
	return min(c, limit)
}

// Delay returns the jittered delay before retry n: a uniform draw from
// [0, Ceiling(n)].
func (b Backoff) Delay(n int) time.Duration {
	c := b.Ceiling(n)
	if c <= 0 {
		return 0
	}
	rnd := b.Rand
	if rnd == nil {
		rnd = rand.Int64N
	}
	if c == time.Duration(1<<63-1) {
		return time.Duration(rnd(int64(c)))
	}
	return time.Duration(rnd(int64(c) + 1))
}

// Sleep waits for d or until ctx is done, whichever comes first, and returns
// ctx.Err() in the latter case. It is the default sleeper of [Config].
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
