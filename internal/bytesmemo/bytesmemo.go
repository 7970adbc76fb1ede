// Package bytesmemo remembers values by the exact bytes they were made
// from, within a bound on the memory they hold.
//
// A Memo serves a value computed from a byte string (a parse, a
// fingerprint) to whoever presents the same bytes again. Keys are compared
// whole, never by a hash alone, so a hit is exactly the value that was put
// under those bytes: no collision can pass different bytes off as the same.
package bytesmemo

import "sync"

// Memo is a map from byte strings to values of type V, bounded by the
// bytes its entries are counted for.
//
// Entries live in two generations. Put adds to the current one; when an
// entry would take the current generation over half the bound, the current
// generation becomes the previous one (the old previous one is dropped)
// and a new current one starts empty. A hit in the previous generation
// moves the entry to the current one, so entries that keep being asked for
// stay while the others age out. At most the bound is held, whatever the
// keys.
//
// A Memo is safe for concurrent use; a hit in the current generation takes
// a read lock only. Every caller that gets an entry gets the same V: when
// V is or holds a pointer, what it points to is shared by them, and must
// be read-only once put or itself safe for concurrent use.
//
// The zero Memo remembers nothing; use [New].
type Memo[V any] struct {
	half int // bytes per generation

	mu        sync.RWMutex
	cur, prev map[string]entry[V]
	curBytes  int
}

// entry is a value and the bytes it is counted for.
type entry[V any] struct {
	v    V
	cost int
}

// New returns an empty Memo that holds entries counted for at most
// maxBytes in all (half of it per generation). With maxBytes < 2 it
// remembers nothing.
func New[V any](maxBytes int) *Memo[V] {
	return &Memo[V]{half: maxBytes / 2, cur: map[string]entry[V]{}}
}

// Get returns the value put under key, when ok accepts it (a nil ok
// accepts any), and reports whether there was one. A value found in the
// previous generation moves to the current one. ok is called with none,
// one or both of the generations' values for key; it may be called with
// m's lock held and must not call m.
func (m *Memo[V]) Get(key []byte, ok func(V) bool) (V, bool) {
	m.mu.RLock()
	e, hit := m.cur[string(key)]
	m.mu.RUnlock()
	if hit && accepts(ok, e.v) {
		return e.v, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, hit := m.cur[string(key)]; hit && accepts(ok, e.v) {
		return e.v, true // put there meanwhile
	}
	if e, hit := m.prev[string(key)]; hit && accepts(ok, e.v) {
		m.putLocked(key, e)
		return e.v, true
	}
	var zero V
	return zero, false
}

// accepts reports whether ok accepts v; a nil ok accepts any.
func accepts[V any](ok func(V) bool, v V) bool {
	return ok == nil || ok(v)
}

// Put remembers v under key, replacing what was put under it before,
// counted for cost bytes: what the caller estimates the entry holds, its
// key (which Put copies: the caller may reuse key) and its value with what
// it points to. An entry is counted for at least its key's length and one
// byte, so that no number of entries escapes the bound. An entry counted
// for more than half the bound is not remembered.
func (m *Memo[V]) Put(key []byte, v V, cost int) {
	m.mu.Lock()
	m.putLocked(key, entry[V]{v: v, cost: max(cost, len(key), 1)})
	m.mu.Unlock()
}

// putLocked stores e in the current generation, starting a new generation
// first when the current one has no room. m.mu is held.
func (m *Memo[V]) putLocked(key []byte, e entry[V]) {
	if e.cost > m.half || m.cur == nil {
		return
	}
	if old, ok := m.cur[string(key)]; ok {
		m.curBytes -= old.cost
	}
	if m.curBytes+e.cost > m.half {
		m.prev, m.cur, m.curBytes = m.cur, make(map[string]entry[V], len(m.cur)), 0
	}
	m.cur[string(key)] = e
	m.curBytes += e.cost
}

// Stats is what a Memo holds.
type Stats struct {
	// Current and Previous are the entries of each generation.
	Current, Previous int
	// CurrentBytes is what the current generation's entries are counted
	// for; it is at most half the bound.
	CurrentBytes int
}

// Stats returns what m holds now.
func (m *Memo[V]) Stats() Stats {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return Stats{Current: len(m.cur), Previous: len(m.prev), CurrentBytes: m.curBytes}
}
