package attribution

import (
	"sync"
	"time"
)

// Accepted is the set of MCP sessions a server has accepted a request in
// (answered 2xx) lately, as one sidecar process saw it. The processor
// records a request's id at once only in a session of this set; in any
// other session it waits for the server's answer, so that a client
// making up session ids writes nothing to the store (the server refuses
// every request of a session it did not issue). It is bounded: at most
// max sessions, each forgotten ttl after it was last confirmed or when
// the session ends; when full, one session is dropped at random, which
// only costs that session's next request a wait for its answer.
//
// The zero value and nil are an empty set that remembers nothing. It is
// safe for concurrent use.
type Accepted struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu       sync.Mutex
	sessions map[string]int64 // session → when it is forgotten (UnixNano)
}

// Default bounds of [NewAccepted].
const (
	DefaultAcceptedSessions = 16384
	DefaultAcceptedTTL      = 10 * time.Minute
)

// NewAccepted returns a set of at most max sessions (DefaultAcceptedSessions
// when max ≤ 0), each kept ttl (DefaultAcceptedTTL when ttl ≤ 0) after it
// was last added; now is the clock (time.Now when nil).
func NewAccepted(max int, ttl time.Duration, now func() time.Time) *Accepted {
	if max <= 0 {
		max = DefaultAcceptedSessions
	}
	if ttl <= 0 {
		ttl = DefaultAcceptedTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Accepted{max: max, ttl: ttl, now: now, sessions: make(map[string]int64)}
}

// Has reports whether a server accepted a request of session lately.
func (a *Accepted) Has(session string) bool {
	if a == nil || a.sessions == nil || session == "" {
		return false
	}
	now := a.now().UnixNano()
	a.mu.Lock()
	defer a.mu.Unlock()
	until, ok := a.sessions[session]
	if ok && now >= until {
		delete(a.sessions, session)
		return false
	}
	return ok
}

// Add notes that a server accepted a request of session (its answer was
// 2xx). Session ids longer than the store records (1024 bytes) are not
// kept.
func (a *Accepted) Add(session string) {
	if a == nil || a.sessions == nil || session == "" || len(session) > 1024 {
		return
	}
	until := a.now().Add(a.ttl).UnixNano()
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.sessions[session]; !ok && len(a.sessions) >= a.max {
		a.evict(until - int64(a.ttl))
	}
	a.sessions[session] = until
}

// Forget drops session (it ended: a DELETE).
func (a *Accepted) Forget(session string) {
	if a == nil || a.sessions == nil {
		return
	}
	a.mu.Lock()
	delete(a.sessions, session)
	a.mu.Unlock()
}

// Len returns how many sessions the set holds (some may have expired).
func (a *Accepted) Len() int {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.sessions)
}

// evict makes room for one session: the expired ones go, or, when none
// has, one at random (Go's map order).
func (a *Accepted) evict(now int64) {
	for s, until := range a.sessions {
		if now >= until {
			delete(a.sessions, s)
		}
	}
	if len(a.sessions) < a.max {
		return
	}
	for s := range a.sessions {
		delete(a.sessions, s)
		return
	}
}
