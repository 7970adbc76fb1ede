package attribution

import (
	"hash/maphash"
	"sync"
)

// Accounted size of the bookkeeping around one entry and one session, in
// bytes: the entry struct, its map slot and the key's string header (entry),
// the session struct and its map slot (session). Measured on amd64 with
// TestMemoryFlat; the strings' bytes are added on top.
const (
	entryOverhead   = 208
	sessionOverhead = 112 + seenBytes
)

// seenBytes is the size of a session's filter of the keys it ever recorded.
const seenBytes = 256

// entry is one remembered key. It sits on two intrusive lists: the shard's
// (oldest first, which is also soonest to expire, since every entry of a
// table lives for the same TTL) and its session's (oldest first).
type entry struct {
	key       string
	origin    Origin
	expires   int64 // unix nanoseconds
	ambiguous bool
	size      int
	sess      *session

	inShard, inSession links
}

// links are an entry's neighbours on one list.
type links struct{ prev, next *entry }

func shardLinks(e *entry) *links   { return &e.inShard }
func sessionLinks(e *entry) *links { return &e.inSession }

// chain is an intrusive list of entries, linked through the links at
// returns (the shard's or the session's).
type chain struct{ head, tail *entry }

// pushBack links e as the newest entry.
func (l *chain) pushBack(e *entry, at func(*entry) *links) {
	at(e).prev = l.tail
	if l.tail != nil {
		at(l.tail).next = e
	} else {
		l.head = e
	}
	l.tail = e
}

// unlink removes e from the chain.
func (l *chain) unlink(e *entry, at func(*entry) *links) {
	ln := at(e)
	if ln.prev != nil {
		at(ln.prev).next = ln.next
	} else {
		l.head = ln.next
	}
	if ln.next != nil {
		at(ln.next).prev = ln.prev
	} else {
		l.tail = ln.prev
	}
}

// session is the list of one MCP session's entries in a shard, and a Bloom
// filter (two bits per key) of every key the session recorded while it was
// in the shard, so a key that comes back after its entry was evicted or
// expired is seen as reused.
type session struct {
	id      string
	entries chain
	n       int
	seen    *[seenBytes / 8]uint64 // nil when the table does not track reuse
}

// reused reports whether key may have been recorded before in ss, and adds
// it to the filter.
func (ss *session) reused(seed maphash.Seed, key []byte) bool {
	if ss.seen == nil {
		return false
	}
	h := maphash.Bytes(seed, key)
	const bits = seenBytes * 8
	a, b := h%bits, (h>>32)%bits
	was := ss.seen[a/64]&(1<<(a%64)) != 0 && ss.seen[b/64]&(1<<(b%64)) != 0
	ss.seen[a/64] |= 1 << (a % 64)
	ss.seen[b/64] |= 1 << (b % 64)
	return was
}

// limits are one table's bounds, per shard.
type limits struct {
	entries, perSession, bytes int
	ttl                        int64 // nanoseconds
	// trackReuse makes a key recorded again after its entry left the
	// shard ambiguous (while its session stays in the shard).
	trackReuse bool
}

// shard is a bounded, expiring map guarded by one mutex.
type shard struct {
	mu       sync.Mutex
	lim      limits
	seed     maphash.Seed
	m        map[string]*entry
	sessions map[string]*session
	entries  chain // oldest first
	n, bytes int
}

func newShard(lim limits) *shard {
	return &shard{lim: lim, seed: maphash.MakeSeed(), m: make(map[string]*entry), sessions: make(map[string]*session)}
}

// put records key → o for session sid at time now. A key already present
// with another origin becomes ambiguous (and stays so until it leaves).
func (s *shard) put(sid string, key []byte, o Origin, now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	if e, ok := s.m[string(key)]; ok {
		if e.origin != o {
			e.ambiguous = true
		}
		s.remove(e) // re-inserted at the newest end with a fresh TTL
		e.inShard, e.inSession = links{}, links{}
		e.expires = now + s.lim.ttl
		s.insert(e, sid)
		return
	}
	e := &entry{key: string(key), origin: o, expires: now + s.lim.ttl}
	e.size = entryOverhead + len(e.key) + len(o.Method) + len(o.Name)
	s.insert(e, sid)
	e.ambiguous = e.sess.reused(s.seed, key)
}

// get returns the entry for key if it is present and not expired.
func (s *shard) get(key []byte, now int64) (Origin, bool, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[string(key)]
	if !ok {
		return Origin{}, false, false
	}
	if e.expires <= now {
		s.remove(e)
		return Origin{}, false, false
	}
	return e.origin, true, e.ambiguous
}

// dropSession removes every entry of session sid.
func (s *shard) dropSession(sid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[sid]
	if !ok {
		return
	}
	for ss.entries.head != nil {
		s.remove(ss.entries.head) // removes the session too once it is empty
	}
}

// insert links e as the newest entry of the shard and of session sid, then
// evicts until the bounds hold again.
func (s *shard) insert(e *entry, sid string) {
	ss, ok := s.sessions[sid]
	if !ok {
		ss = &session{id: sid}
		if s.lim.trackReuse {
			ss.seen = new([seenBytes / 8]uint64)
		}
		s.sessions[sid] = ss
		s.bytes += sessionOverhead + len(sid)
	}
	e.sess = ss
	s.m[e.key] = e
	s.entries.pushBack(e, shardLinks)
	ss.entries.pushBack(e, sessionLinks)
	ss.n++
	s.n++
	s.bytes += e.size
	for ss.n > s.lim.perSession && ss.entries.head != e {
		s.remove(ss.entries.head)
	}
	for (s.n > s.lim.entries || s.bytes > s.lim.bytes) && s.entries.head != e {
		s.remove(s.entries.head)
	}
}

// remove unlinks e from the map and both lists, and drops its session when
// it was the session's last entry.
func (s *shard) remove(e *entry) {
	delete(s.m, e.key)
	s.entries.unlink(e, shardLinks)
	ss := e.sess
	ss.entries.unlink(e, sessionLinks)
	ss.n--
	s.n--
	s.bytes -= e.size
	if ss.n == 0 {
		delete(s.sessions, ss.id)
		s.bytes -= sessionOverhead + len(ss.id)
	}
}

// expire removes the expired entries at the old end of the shard.
func (s *shard) expire(now int64) {
	for s.entries.head != nil && s.entries.head.expires <= now {
		s.remove(s.entries.head)
	}
}
