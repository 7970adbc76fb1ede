package toolpin

import (
	"sync/atomic"
	"time"

	"github.com/mcp-extproc/mcp-extproc/internal/bytesmemo"
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

// fpCache remembers what [Of] returned for the definitions seen, keyed by
// their bytes exactly as the list held them, so that a server answering
// the same bytes again costs a map lookup per definition instead of a
// parse, a canonicalization and a hash per member. Of is a pure function
// of (kind, bytes) and the key is the whole byte string (compared, not
// only hashed), so a hit is exactly what Of would return: no collision can
// make a changed definition look unchanged.
type fpCache struct {
	*bytesmemo.Memo[*fpEntry]
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
	return &fpCache{bytesmemo.New[*fpEntry](maxBytes)}
}

// cost estimates what the entry of item holds: the key, the name and the
// fingerprint (per member its name, 64 hex digits and the map's share).
func cost(item []byte, e *fpEntry) int {
	return len(item) + len(e.name) + 96*len(e.fp) + 160
}

// each calls f with the index and entry (or Of's error) of every item of
// items, definitions of kind k, in order: from the cache, or from Of (then
// remembering them). On a nil cache, every entry is new.
func (c *fpCache) each(k Kind, items [][]byte, f func(i int, e *fpEntry, err error)) {
	for i, item := range items {
		e, err := c.entry(k, item)
		f(i, e, err)
	}
}

// entry returns the entry of item from the cache or from Of (remembering
// it).
func (c *fpCache) entry(k Kind, item []byte) (*fpEntry, error) {
	if c == nil {
		return newEntry(k, item)
	}
	if e, ok := c.Get(item, func(e *fpEntry) bool { return e.kind == k }); ok {
		return e, nil
	}
	e, err := newEntry(k, item)
	if err != nil {
		return nil, err // not remembered: an unreadable definition is no steady state
	}
	c.Put(item, e, cost(item, e))
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
	*bytesmemo.Memo[*resolved]
}

// newListCache returns a cache of at most maxBytes (nil when maxBytes ≤
// 0: no cache).
func newListCache(maxBytes int) *listCache {
	if maxBytes <= 0 {
		return nil
	}
	return &listCache{bytesmemo.New[*resolved](maxBytes)}
}

// lookup returns the resolved definitions of result, a list result of
// kind k seen before.
func (c *listCache) lookup(k Kind, result []byte) (*resolved, bool) {
	if c == nil {
		return nil, false
	}
	return c.Get(result, func(r *resolved) bool { return r.kind == k })
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
	c.Put(result, r, n)
}
