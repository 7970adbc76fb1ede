package ratelimit

import (
	"context"
	"sync"
	"time"
)

// Algorithm is a counting algorithm.
type Algorithm string

// The algorithms cpex-plugins' rate_limiter documents.
const (
	FixedWindow   Algorithm = "fixed_window"   // counts in a window that starts at the first request
	SlidingWindow Algorithm = "sliding_window" // counts the requests of the last window
	TokenBucket   Algorithm = "token_bucket"   // a bucket of count tokens refilled at count/window
)

// Rate is a limit: Count requests per Window.
type Rate struct {
	Count  int
	Window time.Duration
}

// Decision is the answer of a store for one key.
type Decision struct {
	Allowed   bool
	Remaining int
	// ResetIn is when the window resets (fixed, sliding) or the next token
	// comes (token bucket).
	ResetIn time.Duration
}

// Store counts requests per key. Implementations are safe for concurrent
// use.
type Store interface {
	// Hit counts one request on key under r with algorithm a.
	Hit(ctx context.Context, a Algorithm, key string, r Rate) (Decision, error)
	Close() error
}

// memory is the in-process store: counters of one sidecar.
type memory struct {
	now func() time.Time

	mu    sync.Mutex
	state map[string]*counter
	calls int
}

type counter struct {
	start  time.Time   // fixed window
	count  int         // fixed window
	times  []time.Time // sliding window
	tokens float64     // token bucket
	last   time.Time   // token bucket, and for eviction
	until  time.Time   // when the entry may be evicted
}

func newMemory(now func() time.Time) *memory {
	return &memory{now: now, state: map[string]*counter{}}
}

// sweepEvery is how many hits pass between evictions of expired keys.
const sweepEvery = 128

// Hit implements Store.
func (m *memory) Hit(_ context.Context, a Algorithm, key string, r Rate) (Decision, error) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls++; m.calls%sweepEvery == 0 {
		for k, c := range m.state {
			if now.After(c.until) {
				delete(m.state, k)
			}
		}
	}
	c := m.state[key]
	if c == nil {
		c = &counter{start: now, tokens: float64(r.Count), last: now}
		m.state[key] = c
	}
	switch a {
	case SlidingWindow:
		cut := now.Add(-r.Window)
		i := 0
		for i < len(c.times) && !c.times[i].After(cut) {
			i++
		}
		c.times = c.times[i:]
		d := Decision{}
		if len(c.times) < r.Count {
			c.times = append(c.times, now)
			d.Allowed = true
		}
		d.Remaining = r.Count - len(c.times)
		d.ResetIn = c.times[0].Add(r.Window).Sub(now)
		c.until = now.Add(r.Window)
		return d, nil
	case TokenBucket:
		per := float64(r.Count) / float64(r.Window)
		c.tokens = min(float64(r.Count), c.tokens+float64(now.Sub(c.last))*per)
		c.last = now
		d := Decision{}
		if c.tokens >= 1 {
			c.tokens--
			d.Allowed = true
		}
		d.Remaining = int(c.tokens)
		if c.tokens < 1 {
			d.ResetIn = time.Duration((1 - c.tokens) / per)
		}
		c.until = now.Add(time.Hour)
		return d, nil
	}
	if now.Sub(c.start) >= r.Window {
		c.start, c.count = now, 0
	}
	c.count++
	c.until = c.start.Add(r.Window)
	return Decision{Allowed: c.count <= r.Count, Remaining: max(r.Count-c.count, 0), ResetIn: c.start.Add(r.Window).Sub(now)}, nil
}

// Close implements Store.
func (m *memory) Close() error { return nil }
