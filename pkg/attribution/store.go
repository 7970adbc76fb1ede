// Package attribution remembers what each forwarded MCP request was, so that
// a JSON-RPC response arriving on another HTTP stream can still be given the
// post hooks of its request.
//
// A response can reach the client on a stream that did not carry its
// request: a GET that resumes a stream with Last-Event-ID makes a 2025-11-25
// server replay the stream's events, the tool's response included; a
// task-augmented tools/call answers with a task, and the tool's result comes
// later as the answer to tasks/result (2025-11-25) or inside a tasks/get
// answer (the 2026-07-28 tasks extension). The stream that sees such a
// response knows its JSON-RPC id (or the task id) but not the method and
// target it answers. A [Store] is that memory, shared by all streams of a
// sidecar ([Memory], in process), or by all replicas of a gateway
// (package redisstore, which keeps a Memory in front of Redis or Valkey;
// docs/attribution-store.md). What is remembered:
//
//   - requests: (MCP session id, JSON-RPC id) → [Origin] (method and target
//     name), recorded when a request is forwarded;
//   - tasks: (MCP session id, task id) → [Origin] of the tools/call that
//     created the task, recorded when its CreateTaskResult is forwarded.
//
// Ids are compared as JSON values: 7 and "7" are different ids; a string id
// is compared after unescaping ("\u0061" is "a"). A key recorded twice with
// different origins (a client reusing a request id for another method) is
// ambiguous from then on: [Memory.Lookup] reports [ErrAmbiguous] rather than
// guess, so a reused id cannot turn a tool's result into, say, a tools/list
// answer that no post hook inspects. The same holds for an id reused after
// its entry was evicted or expired: each session keeps a 256-byte Bloom
// filter of the ids it recorded, and a new entry whose id may have been seen
// before is ambiguous. The filter lives as long as the session has entries in
// the store; its false positives (about 5% of new ids after 256 ids in the
// session, 40% after 1024) only make more responses unattributable — the
// safe direction. Once every entry of a session has left the store, its
// history is gone.
//
// # Bounds
//
// Memory is bounded three ways, each enforced per table (requests, tasks) on
// insertion by evicting the oldest entries: a number of entries, a number of
// entries per MCP session (so one session cannot evict everyone else's), and
// a number of accounted bytes (each entry counts a fixed overhead for its
// struct and map slot, plus its key and origin strings; each session a fixed
// overhead, its filter and its id). Fields longer than
// [Options.MaxFieldBytes] are not recorded at all. With the defaults a Memory
// holds at most 65536 request entries and 16384 task entries in at most 24
// MiB of accounted bytes (16 MiB requests, 8 MiB tasks). A typical request
// entry (a UUID session id, a small id, a tool name of 11 bytes) accounts for
// about 270 bytes plus its share of its session's 400, so the byte budget
// binds first, at about 55 000 request entries; the live heap measured by
// TestMemoryFlat is below the accounted bytes (about 230 bytes per entry with
// 8 entries per session). Entries also expire: each table has a TTL, checked
// lazily (on insertion at the old end, and on lookup), so a Memory runs no
// goroutine and needs no Close.
//
// The tables are sharded by session id, each shard behind its own mutex; the
// global caps are split evenly over the shards.
//
// What to do with a response that cannot be attributed (evicted, expired,
// never seen, ambiguous) is the caller's policy.
package attribution

import (
	"errors"
	"hash/maphash"
	"time"
)

// Origin is what a request was: its JSON-RPC method and its target (the tool
// or prompt name, or the resource URI; empty for methods without one).
type Origin struct {
	Method string
	Name   string
}

// Sentinel errors of the Store. Use errors.Is.
var (
	// ErrUnknown: nothing is recorded for the key (never recorded, evicted,
	// expired, or its session forgotten).
	ErrUnknown = errors.New("attribution: unknown request or task")
	// ErrAmbiguous: the key was recorded with two different origins, or may
	// have been recorded before its current entry (see the package doc).
	ErrAmbiguous = errors.New("attribution: id reused, origin ambiguous")
	// ErrInvalidID: the JSON-RPC id is not a JSON string or number, or a
	// task id is empty.
	ErrInvalidID = errors.New("attribution: invalid id")
	// ErrTooLarge: a field is longer than Options.MaxFieldBytes; nothing was
	// recorded.
	ErrTooLarge = errors.New("attribution: field too large to record")
)

// Options bound a Store. Zero values mean the defaults in brackets.
type Options struct {
	MaxRequests           int           // request entries in all [65536]
	MaxRequestsPerSession int           // request entries of one session [1024]
	RequestTTL            time.Duration // life of a request entry [10m]
	MaxTasks              int           // task entries in all [16384]
	MaxTasksPerSession    int           // task entries of one session [256]
	TaskTTL               time.Duration // life of a task entry [1h]
	MaxBytes              int           // accounted bytes in all, 2/3 requests, 1/3 tasks [24 MiB]
	MaxFieldBytes         int           // longest session id, id, task id or name recorded [1024]
	Shards                int           // independent locks [16]
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxRequests, 65536)
	def(&o.MaxRequestsPerSession, 1024)
	def(&o.MaxTasks, 16384)
	def(&o.MaxTasksPerSession, 256)
	def(&o.MaxBytes, 24<<20)
	def(&o.MaxFieldBytes, 1024)
	def(&o.Shards, 16)
	if o.RequestTTL <= 0 {
		o.RequestTTL = 10 * time.Minute
	}
	if o.TaskTTL <= 0 {
		o.TaskTTL = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Memory is the in-process [Store]: the sidecar-wide memory of forwarded
// requests and created tasks, bounded as the package doc says. It is safe
// for concurrent use. Create one per sidecar with New.
type Memory struct {
	opts     Options
	seed     maphash.Seed
	requests []*shard
	tasks    []*shard
}

// New returns an empty Memory bounded by opts.
func New(opts Options) *Memory {
	o := opts.withDefaults()
	s := &Memory{opts: o, seed: maphash.MakeSeed()}
	reqBytes := o.MaxBytes / 3 * 2
	s.requests = shards(o.Shards, limits{
		entries: o.MaxRequests, perSession: o.MaxRequestsPerSession,
		bytes: reqBytes, ttl: int64(o.RequestTTL), trackReuse: true,
	})
	s.tasks = shards(o.Shards, limits{
		entries: o.MaxTasks, perSession: o.MaxTasksPerSession,
		bytes: o.MaxBytes - reqBytes, ttl: int64(o.TaskTTL),
	})
	return s
}

// shards splits the global limits lim over n shards.
func shards(n int, lim limits) []*shard {
	per := limits{
		entries:    max(1, lim.entries/n),
		perSession: lim.perSession,
		bytes:      max(1, lim.bytes/n),
		ttl:        lim.ttl,
		trackReuse: lim.trackReuse,
	}
	per.perSession = min(per.perSession, per.entries)
	out := make([]*shard, n)
	for i := range out {
		out[i] = newShard(per)
	}
	return out
}

func (s *Memory) shard(table []*shard, session string) *shard {
	return table[maphash.String(s.seed, session)%uint64(len(table))]
}

func (s *Memory) now() int64 { return s.opts.Now().UnixNano() }
