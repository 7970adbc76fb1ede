package redisstore

import (
	"errors"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
)

// Key layout (docs/attribution-store.md), P the key prefix, n the length of
// the session id s in bytes:
//
//	P r:n:{s}<id>   a request entry: the canonical JSON-RPC id
//	P t:n:{s}<tid>  a task entry: the task id
//	P ri:n:{s}      the session's request entries, oldest first (a list)
//	P ti:n:{s}      the session's task entries, oldest first (a list)
//	P rs:n:{s}      the session's filter of request ids ever recorded
//
// The length makes every (session, id) pair its own key whatever bytes the
// session id holds; the braces make the session a Redis Cluster hash tag,
// so one session's keys live in one slot (the scripts touch several).
type keyspace struct{ prefix string }

func (k keyspace) session(kind, session string) string {
	var b strings.Builder
	b.Grow(len(k.prefix) + len(kind) + len(session) + 12)
	b.WriteString(k.prefix)
	b.WriteString(kind)
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(len(session)))
	b.WriteString(":{")
	b.WriteString(session)
	b.WriteByte('}')
	return b.String()
}

func (k keyspace) request(session string, canonID []byte) string {
	return k.session("r", session) + string(canonID)
}

func (k keyspace) task(session, taskID string) string { return k.session("t", session) + taskID }

// ambiguousValue is stored for a key recorded with two origins. An encoded
// origin always holds a ':', so it cannot be mistaken for it.
const ambiguousValue = "!"

// encodeOrigin is the value of an entry: the method's length in bytes, ':',
// the method, the name (any bytes in either).
func encodeOrigin(o attribution.Origin) string {
	return strconv.Itoa(len(o.Method)) + ":" + o.Method + o.Name
}

// errCorrupt: a value this store did not write (another program shares the
// prefix). It is reported as an unusable answer, never as an origin.
var errCorrupt = errors.New("redisstore: value not written by this store")

// decodeOrigin reads a stored value.
func decodeOrigin(v string) (attribution.Origin, error) {
	if v == ambiguousValue {
		return attribution.Origin{}, attribution.ErrAmbiguous
	}
	l, rest, ok := strings.Cut(v, ":")
	n, err := strconv.Atoi(l)
	if !ok || err != nil || n < 0 || n > len(rest) || strconv.Itoa(n) != l {
		return attribution.Origin{}, errCorrupt
	}
	return attribution.Origin{Method: rest[:n], Name: rest[n:]}, nil
}

// filterBits is the size of a session's filter of recorded request ids, in
// bits: as the in-process store's (attribution package doc).
const filterBits = 256 * 8

// filterPositions are the two bits of key in its session's filter. The hash
// is the same on every replica (FNV-1a), so all of them share one filter.
func filterPositions(key string) (a, b uint64) {
	h := fnv.New64a()
	h.Write([]byte(key))
	v := h.Sum64()
	return v % filterBits, (v >> 32) % filterBits
}
