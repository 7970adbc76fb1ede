package toolpin

import (
	"context"
	"sync"
	"time"
)

// Item is one definition of a list: its name and fingerprint.
type Item struct {
	Name string
	FP   Fingerprint
}

// Store keeps the pins of every scope, and what the last list of each
// scope showed changed (for the calls that follow). [Memory] keeps them in
// the process; [Redis] shares them between replicas, so that they agree on
// what was pinned first.
type Store interface {
	// Pin pins each item's fingerprint under (scope, kind, its name)
	// unless one is pinned there already (the first wins, also between
	// replicas) and returns the pinned fingerprints, in the items' order.
	// Seeing a pin again keeps it for another TTL. A pin the store has no
	// room for is returned as nil (not pinned).
	Pin(ctx context.Context, scope string, kind Kind, items []Item) ([]Fingerprint, error)
	// Mark records what the last list of (scope, kind) showed: the
	// members changed of each name in changed, and no change for the
	// other names in seen.
	Mark(ctx context.Context, scope string, kind Kind, seen []string, changed map[string][]string) error
	// Changed returns the members that changed in name's definition as
	// the last list of (scope, kind) showed it, nil when none did.
	Changed(ctx context.Context, scope string, kind Kind, name string) ([]string, error)
}

// Default bounds of the stores.
const (
	DefaultTTL        = 7 * 24 * time.Hour
	DefaultMaxEntries = 65536
)

// Memory is a Store in the process, bounded by entries and TTL. It is safe
// for concurrent use.
type Memory struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	pins  map[pinKey]pinned
	marks map[pinKey][]string
}

type pinKey struct {
	scope string
	kind  Kind
	name  string
}

type pinned struct {
	fp      Fingerprint
	expires time.Time
}

// NewMemory returns a Memory of at most max pins (DefaultMaxEntries when
// ≤ 0), each kept ttl after it was last seen (DefaultTTL when ≤ 0); now is
// the clock (time.Now when nil).
func NewMemory(max int, ttl time.Duration, now func() time.Time) *Memory {
	if max <= 0 {
		max = DefaultMaxEntries
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Memory{max: max, ttl: ttl, now: now, pins: map[pinKey]pinned{}, marks: map[pinKey][]string{}}
}

// pinTTL is how long a pin lives after a Pin last saw it.
func (m *Memory) pinTTL() time.Duration { return m.ttl }

// Pin implements [Store.Pin].
func (m *Memory) Pin(_ context.Context, scope string, kind Kind, items []Item) ([]Fingerprint, error) {
	now := m.now()
	out := make([]Fingerprint, len(items))
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, it := range items {
		k := pinKey{scope, kind, it.Name}
		p, ok := m.pins[k]
		if ok && now.After(p.expires) {
			delete(m.pins, k)
			ok = false
		}
		if !ok {
			if len(m.pins) >= m.max {
				m.sweep(now)
			}
			if len(m.pins) >= m.max {
				continue // no room: not pinned
			}
			p.fp = it.FP
		}
		p.expires = now.Add(m.ttl)
		m.pins[k] = p
		out[i] = p.fp
	}
	return out, nil
}

// sweep drops the expired pins.
func (m *Memory) sweep(now time.Time) {
	for k, p := range m.pins {
		if now.After(p.expires) {
			delete(m.pins, k)
		}
	}
}

// Mark implements [Store.Mark].
func (m *Memory) Mark(_ context.Context, scope string, kind Kind, seen []string, changed map[string][]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range seen {
		k := pinKey{scope, kind, name}
		if members, ok := changed[name]; ok {
			if len(m.marks) < m.max {
				m.marks[k] = members
			}
			continue
		}
		delete(m.marks, k)
	}
	return nil
}

// Changed implements [Store.Changed].
func (m *Memory) Changed(_ context.Context, scope string, kind Kind, name string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.marks[pinKey{scope, kind, name}], nil
}
