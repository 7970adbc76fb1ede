package toolpin

import (
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCacheBytes bounds the fingerprint cache of a [Pinner]: the
// definitions it remembers, counted by their bytes and an estimate of
// their fingerprints' size. A list of 200 tools of ~330 bytes takes about
// 0.2 MB of it.
const DefaultCacheBytes = 8 << 20

// MaxPinMemo bounds how long a [Pinner] trusts what the pin store
// answered for a definition (see [Pinner] and docs/tool-pinning.md): at
// most this long, and at most half the store's TTL.
const MaxPinMemo = 30 * time.Second

// fpCache remembers what [Of] returned for the definitions seen, keyed by
// their bytes exactly as the list held them, so that a server answering
// the same bytes again costs a map lookup per definition instead of a
// parse, a canonicalization and a hash per member. Of is a pure function
// of (kind, bytes) and the key is the whole byte string (compared, not
// only hashed), so a hit is exactly what Of would return: no collision can
// make a changed definition look unchanged.
//
// It is bounded in two generations: entries go to cur; when cur would
// exceed half the bound, it becomes prev (the old prev is dropped) and cur
// starts empty. A hit in prev moves the entry to cur, so what the lists
// show stays while what no list shows any more ages out. It is safe for
// concurrent use; the steady state (every definition in cur) takes the
// read lock once per list.
type fpCache struct {
	half int // bytes per generation

	mu        sync.RWMutex
	cur, prev map[string]*fpEntry
	curBytes  int
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
	return &fpCache{half: maxBytes / 2, cur: map[string]*fpEntry{}}
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
		if e, ok := c.cur[string(item)]; ok && e.kind == k {
			f(i, e, nil)
			continue
		}
		c.mu.RUnlock()
		e, err := c.miss(k, item)
		f(i, e, err)
		c.mu.RLock()
	}
	c.mu.RUnlock()
}

// newEntry is the entry of item, from Of.
func newEntry(k Kind, item []byte) (*fpEntry, error) {
	name, fp, err := Of(k, item)
	if err != nil {
		return nil, err
	}
	return &fpEntry{kind: k, name: name, fp: fp}, nil
}

// miss returns the entry of item from the previous generation (moving it
// to the current one) or from Of (remembering it).
func (c *fpCache) miss(k Kind, item []byte) (*fpEntry, error) {
	c.mu.Lock()
	if e, ok := c.cur[string(item)]; ok && e.kind == k {
		c.mu.Unlock()
		return e, nil // another list put it there meanwhile
	}
	if e, ok := c.prev[string(item)]; ok && e.kind == k {
		c.put(item, e)
		c.mu.Unlock()
		return e, nil
	}
	c.mu.Unlock()
	e, err := newEntry(k, item)
	if err != nil {
		return nil, err // not remembered: an unreadable definition is no steady state
	}
	c.mu.Lock()
	c.put(item, e)
	c.mu.Unlock()
	return e, nil
}

// put stores e under item in cur, starting a new generation first when
// cur has no room; an entry larger than a generation is not stored. c.mu
// is held.
func (c *fpCache) put(item []byte, e *fpEntry) {
	n := cost(item, e)
	if n > c.half {
		return
	}
	if old, ok := c.cur[string(item)]; ok {
		c.curBytes -= cost(item, old) // another kind's entry of the same bytes
	}
	if c.curBytes+n > c.half {
		c.prev, c.cur, c.curBytes = c.cur, make(map[string]*fpEntry, len(c.cur)), 0
	}
	c.cur[string(item)] = e
	c.curBytes += n
}

// sizes returns the entries held in each generation and the bytes counted
// in the current one (for tests).
func (c *fpCache) sizes() (cur, prev, curBytes int) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.cur), len(c.prev), c.curBytes
}
