package toolpin

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCacheBytes bounds the caches of a [Pinner]: the definitions it
// remembers and the list results it remembers, half each, counted by
// their bytes and an estimate of what their fingerprints hold. A list of
// 200 tools of ~330 bytes takes about 0.2 MB of each half.
const DefaultCacheBytes = 8 << 20

// MaxPinMemo bounds how long a [Pinner] trusts what the pin store
// answered for a definition (see [Pinner] and docs/tool-pinning.md): at
// most this long, and at most half the store's TTL.
const MaxPinMemo = 30 * time.Second

// gens is a map from byte strings to values of V, bounded in two
// generations: values go to cur; when cur would exceed half the bound, it
// becomes prev (the old prev is dropped) and cur starts empty. A hit in
// prev moves the value to cur, so what keeps being asked for stays while
// what is not any more ages out. It is safe for concurrent use; a hit in
// cur takes the read lock only.
type gens[V any] struct {
	half int // bytes per generation

	mu        sync.RWMutex
	cur, prev map[string]sized[V]
	curBytes  int
}

// sized is a value and the bytes it is counted for.
type sized[V any] struct {
	v    V
	cost int
}

// init makes g empty, bounded by maxBytes.
func (g *gens[V]) init(maxBytes int) {
	g.half, g.cur, g.prev, g.curBytes = maxBytes/2, map[string]sized[V]{}, nil, 0
}

// get returns the value of key that ok accepts, from cur or prev (moving
// it to cur).
func (g *gens[V]) get(key []byte, ok func(V) bool) (V, bool) {
	g.mu.RLock()
	s, hit := g.cur[string(key)]
	g.mu.RUnlock()
	if hit && ok(s.v) {
		return s.v, true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if s, hit := g.cur[string(key)]; hit && ok(s.v) {
		return s.v, true // put there meanwhile
	}
	if s, hit := g.prev[string(key)]; hit && ok(s.v) {
		g.putLocked(key, s)
		return s.v, true
	}
	var zero V
	return zero, false
}

// put stores v under key, counted for cost bytes.
func (g *gens[V]) put(key []byte, v V, cost int) {
	g.mu.Lock()
	g.putLocked(key, sized[V]{v: v, cost: cost})
	g.mu.Unlock()
}

// putLocked stores s in cur, starting a new generation first when cur
// has no room; a value larger than a generation is not stored. g.mu is
// held.
func (g *gens[V]) putLocked(key []byte, s sized[V]) {
	if s.cost > g.half {
		return
	}
	if old, ok := g.cur[string(key)]; ok {
		g.curBytes -= old.cost
	}
	if g.curBytes+s.cost > g.half {
		g.prev, g.cur, g.curBytes = g.cur, make(map[string]sized[V], len(g.cur)), 0
	}
	g.cur[string(key)] = s
	g.curBytes += s.cost
}

// sizes returns the values held in each generation and the bytes counted
// in cur (for tests).
func (g *gens[V]) sizes() (cur, prev, curBytes int) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return len(g.cur), len(g.prev), g.curBytes
}

// fpCache remembers what [Of] returned for the definitions seen, keyed by
// their bytes exactly as the list held them, so that a server answering
// the same bytes again costs a map lookup per definition instead of a
// parse, a canonicalization and a hash per member. Of is a pure function
// of (kind, bytes) and the key is the whole byte string (compared, not
// only hashed), so a hit is exactly what Of would return: no collision can
// make a changed definition look unchanged.
type fpCache struct {
	gens[*fpEntry]
}

// fpEntry is what Of returned for one definition, and what the Pinner
// learnt about it since.
type fpEntry struct {
	kind Kind
	name string
	fp   Fingerprint // shared by every hit: never modified

	// pinned is the last answer of the pin store that agreed with fp
	// (mode record): in which scope, and until when it is trusted.
	pinned atomic.Pointer[agreement]
	// approved is set once the snapshot was found to hold fp (mode
	// approved: the snapshot does not change during a Pinner's life).
	approved atomic.Bool
}

// agreement is a pin store's answer that the pin of (scope, the entry's
// kind and name) is the entry's fingerprint.
type agreement struct {
	scope string
	until time.Time
}

// agrees reports whether the store agreed with e's fingerprint in scope
// recently enough to be trusted at now.
func (e *fpEntry) agrees(scope string, now time.Time) bool {
	a := e.pinned.Load()
	return a != nil && a.scope == scope && now.Before(a.until)
}

// newFPCache returns a cache of at most maxBytes (nil when maxBytes ≤ 0:
// no cache).
func newFPCache(maxBytes int) *fpCache {
	if maxBytes <= 0 {
		return nil
	}
	c := &fpCache{}
	c.init(maxBytes)
	return c
}

// cost estimates what the entry of item holds: the key, the name and the
// fingerprint (per member its name, 64 hex digits and the map's share).
func cost(item []byte, e *fpEntry) int {
	return len(item) + len(e.name) + 96*len(e.fp) + 160
}

// each calls f with the index and entry (or Of's error) of every item of
// items, definitions of kind k, in order: from the cache, or from Of (then
// remembering them). The steady state takes the read lock once per list.
// f must not call c. On a nil cache, every entry is new.
func (c *fpCache) each(k Kind, items [][]byte, f func(i int, e *fpEntry, err error)) {
	if c == nil {
		for i, item := range items {
			e, err := newEntry(k, item)
			f(i, e, err)
		}
		return
	}
	c.mu.RLock()
	for i, item := range items {
		if s, ok := c.cur[string(item)]; ok && s.v.kind == k {
			f(i, s.v, nil)
			continue
		}
		c.mu.RUnlock()
		e, err := c.miss(k, item)
		f(i, e, err)
		c.mu.RLock()
	}
	c.mu.RUnlock()
}

// miss returns the entry of item from the previous generation (moving it
// to the current one) or from Of (remembering it).
func (c *fpCache) miss(k Kind, item []byte) (*fpEntry, error) {
	if e, ok := c.get(item, func(e *fpEntry) bool { return e.kind == k }); ok {
		return e, nil
	}
	e, err := newEntry(k, item)
	if err != nil {
		return nil, err // not remembered: an unreadable definition is no steady state
	}
	c.put(item, e, cost(item, e))
	return e, nil
}

// newEntry is the entry of item, from Of.
func newEntry(k Kind, item []byte) (*fpEntry, error) {
	name, fp, err := Of(k, item)
	if err != nil {
		return nil, err
	}
	return &fpEntry{kind: k, name: name, fp: fp}, nil
}

// resolved is what a list result of one kind holds: its readable
// definitions, by index, and the indices of the unreadable ones. It is
// never modified once made (its entries' notes are atomic).
type resolved struct {
	kind       Kind
	listed     []listedItem
	unreadable []int
}

// listedItem is a readable definition of a list: its index and entry.
type listedItem struct {
	i int
	e *fpEntry
}

// listCache remembers the resolved definitions of the list results seen,
// keyed by the result's bytes exactly as they came: a server answering the
// same list again costs one lookup of the whole result, no walk of its
// items. Like fpCache, a hit is exactly what resolving the bytes again
// would give.
type listCache struct {
	gens[*resolved]
}

// newListCache returns a cache of at most maxBytes (nil when maxBytes ≤
// 0: no cache).
func newListCache(maxBytes int) *listCache {
	if maxBytes <= 0 {
		return nil
	}
	c := &listCache{}
	c.init(maxBytes)
	return c
}

// lookup returns the resolved definitions of result, a list result of
// kind k seen before.
func (c *listCache) lookup(k Kind, result []byte) (*resolved, bool) {
	if c == nil {
		return nil, false
	}
	return c.get(result, func(r *resolved) bool { return r.kind == k })
}

// store remembers r as what result resolves to.
func (c *listCache) store(result []byte, r *resolved) {
	if c == nil {
		return
	}
	n := 2*len(result) + 32*len(r.listed) + 8*len(r.unreadable) + 128
	for _, l := range r.listed {
		n += cost(nil, l.e)
	}
	c.put(result, r, n)
}
