// Package redisstore is an [attribution.Store] shared by the replicas of a
// gateway through Redis or Valkey: what one sidecar replica recorded (which
// request a JSON-RPC id was, which tool a task belongs to), the others can
// look up when the result reaches them (a GET replay after a dropped POST,
// tasks/result, tasks/get).
//
// A Store keeps an [attribution.Memory] in front of Redis. Every record goes
// to the Memory at once and to Redis behind the request (a bounded queue
// that one goroutine drains in pipelines): a request never waits for a
// request record. A task record waits for its write at most
// Options.OpTimeout before the answer that created the task is forwarded,
// so that the client's next tasks/get finds it on any replica. Lookups ask
// the Memory first and Redis only for what it does not know (and, for
// request ids, whether another replica saw the id reused), each bounded by
// OpTimeout.
//
// When Redis cannot be reached the Store answers from its Memory alone, as a
// single sidecar does, and whatever that does not know is unknown: the
// caller's policy for unattributable responses applies (refuse by default).
// After three failures in a row Redis is not asked again for
// Options.Backoff, so an outage costs at most three OpTimeouts per Backoff,
// never a hang; writes made
// while it is down are dropped (their results are unattributable on other
// replicas). Every key has a TTL; see docs/attribution-store.md for the key
// layout and the bounds.
package redisstore

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
)

// Defaults of Options.
const (
	DefaultKeyPrefix   = "mcp-extproc:"
	DefaultDialTimeout = 200 * time.Millisecond
	DefaultOpTimeout   = 50 * time.Millisecond
	DefaultQueueSize   = 4096
	DefaultBackoff     = time.Second
	// maxBatch is the largest pipeline the writer sends.
	maxBatch = 256
	// failuresToDown failed round trips in a row start a Backoff.
	failuresToDown = 3
)

// Options configure a Store. Zero values mean the defaults.
type Options struct {
	// Addrs are the Redis/Valkey addresses (host:port): one for a single
	// server, several for a Redis Cluster. Required.
	Addrs    []string
	Username string
	Password string
	// TLS, if set, is used for every connection.
	TLS *tls.Config
	// KeyPrefix starts every key [DefaultKeyPrefix].
	KeyPrefix string
	// DialTimeout bounds a new connection [DefaultDialTimeout].
	DialTimeout time.Duration
	// OpTimeout bounds every lookup and every batch of writes, and the wait
	// of a task record [DefaultOpTimeout].
	OpTimeout time.Duration
	// QueueSize is how many writes may wait for the writer; more are
	// dropped (counted as fallbacks) [DefaultQueueSize].
	QueueSize int
	// Backoff is how long Redis is left alone after three failures in a
	// row [DefaultBackoff].
	Backoff time.Duration
	// Bounds are the TTLs, per-session caps and field limits, the same in
	// the local Memory and in Redis.
	Bounds attribution.Options
	// Observer is told about round trips and fallbacks (metrics); nil: none.
	Observer Observer
	Logger   zerolog.Logger
}

// Observer is told what the Store did; pkg/metrics implements it. op is
// "lookup", "lookup_task" or "write" (one pipeline of queued writes).
type Observer interface {
	// StoreOp reports one round trip to Redis and its error (nil on
	// success; an unknown key is a success).
	StoreOp(op string, d time.Duration, err error)
	// StoreFallback reports an answer given or a write dropped without
	// Redis: reason "error" (the round trip failed), "down" (skipped during
	// the backoff after a failure) or "queue_full" (writes only).
	StoreFallback(op, reason string)
}

type nopObserver struct{}

func (nopObserver) StoreOp(string, time.Duration, error) {}
func (nopObserver) StoreFallback(string, string)         {}

// Store is the shared attribution store. Create it with New and stop it
// with Close.
type Store struct {
	local  *attribution.Memory
	rdb    redis.UniversalClient
	opts   Options
	keys   keyspace
	obs    Observer
	queue  chan write
	stop   chan struct{}
	done   chan struct{}
	closed sync.Once
	// seq numbers the queued writes (under mu, so that queue order is seq
	// order); flushed is the seq of the last write the writer finished,
	// and flushedCh is closed (and replaced) whenever flushed grows.
	mu        sync.Mutex
	seq       uint64
	flushed   atomic.Uint64
	flushedCh chan struct{}
	// downUntil is the unix nanosecond time before which Redis is not
	// asked (after a failure).
	downUntil atomic.Int64
	// fails counts the failed round trips since the last success.
	fails atomic.Int32
}

var _ attribution.Store = (*Store)(nil)

// ErrNoAddrs is returned by New without Options.Addrs.
var ErrNoAddrs = errors.New("redisstore: no address")

// New returns a Store and starts its writer. It does not wait for Redis: a
// Store whose Redis is down works as the fallback says until it is up.
func New(opts Options) (*Store, error) {
	if len(opts.Addrs) == 0 {
		return nil, ErrNoAddrs
	}
	opts = withDefaults(opts)
	s := &Store{
		local: attribution.New(opts.Bounds),
		rdb: redis.NewUniversalClient(&redis.UniversalOptions{
			Addrs: opts.Addrs, Username: opts.Username, Password: opts.Password, TLSConfig: opts.TLS,
			DialTimeout: opts.DialTimeout, ReadTimeout: opts.OpTimeout, WriteTimeout: opts.OpTimeout,
			ContextTimeoutEnabled: true,
			// The deadline is the caller's: no retry within it, and none of
			// the client's own backoff (the Store has its own).
			MaxRetries: -1, DialerRetries: 1, PoolTimeout: opts.OpTimeout,
			DisableIdentity: true, ClientName: "mcp-extproc",
		}),
		opts:      opts,
		keys:      keyspace{prefix: opts.KeyPrefix},
		obs:       opts.Observer,
		queue:     make(chan write, opts.QueueSize),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		flushedCh: make(chan struct{}),
	}
	go s.writer()
	return s, nil
}

// Client is the store's Redis client, for other state of the sidecar that
// the replicas share through the same Redis (tool pins). Close closes it.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

func withDefaults(o Options) Options {
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = DefaultOpTimeout
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	o.Bounds = o.Bounds.WithDefaults()
	return o
}

// Close stops the writer, after one last flush of the queued writes
// (bounded by OpTimeout), and closes the connections to Redis.
func (s *Store) Close() error {
	var err error
	s.closed.Do(func() {
		close(s.stop)
		<-s.done
		err = s.rdb.Close()
	})
	if err != nil {
		return fmt.Errorf("redisstore: close: %w", err)
	}
	return nil
}

// Local returns the Store's in-process Memory (tests, stats).
func (s *Store) Local() *attribution.Memory { return s.local }

// Record implements [attribution.Store.Record]: the Memory at once, Redis
// behind the request.
func (s *Store) Record(ctx context.Context, session string, id []byte, o attribution.Origin) error {
	if err := s.local.Record(ctx, session, id, o); err != nil {
		return err
	}
	canon, err := attribution.CanonicalID(id)
	if err != nil {
		return err
	}
	s.enqueue(write{kind: writeRequest, session: session, key: s.keys.request(session, canon), value: encodeOrigin(o)})
	return nil
}

// RecordTask implements [attribution.Store.RecordTask]: the Memory at once,
// then Redis, waited for (Sync): the client polls the task next, maybe
// through another replica.
func (s *Store) RecordTask(ctx context.Context, session, taskID string, o attribution.Origin) error {
	if err := s.local.RecordTask(ctx, session, taskID, o); err != nil {
		return err
	}
	if s.enqueue(write{kind: writeTask, session: session, key: s.keys.task(session, taskID), value: encodeOrigin(o)}) {
		s.Sync(ctx)
	}
	return nil
}

// Sync implements [attribution.Syncer]: it returns once the writes queued
// before it were sent (or given up), after OpTimeout at most, or when ctx
// ends. It returns at once when they were sent already.
func (s *Store) Sync(ctx context.Context) {
	s.mu.Lock()
	target := s.seq
	s.mu.Unlock()
	var t *time.Timer
	for {
		s.mu.Lock()
		ch := s.flushedCh
		s.mu.Unlock()
		if s.flushed.Load() >= target {
			return
		}
		if t == nil {
			t = time.NewTimer(s.opts.OpTimeout)
			defer t.Stop()
		}
		select {
		case <-ch:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		case <-s.done:
			return
		}
	}
}

// finished notes that the writes up to seq were sent or given up.
func (s *Store) finished(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushed.Store(seq)
	close(s.flushedCh)
	s.flushedCh = make(chan struct{})
}

// ForgetSession implements [attribution.Store.ForgetSession]: the Memory at
// once, Redis behind the request.
func (s *Store) ForgetSession(ctx context.Context, session string) {
	s.local.ForgetSession(ctx, session)
	s.enqueue(write{kind: writeForget, session: session})
}

// enqueue hands w to the writer, or drops it when the queue is full or
// Redis is known to be down. It reports whether w was queued.
func (s *Store) enqueue(w write) bool {
	if s.isDown() {
		s.obs.StoreFallback("write", "down")
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w.seq = s.seq + 1
	select {
	case s.queue <- w:
		s.seq = w.seq
		return true
	default:
		s.obs.StoreFallback("write", "queue_full")
		return false
	}
}

// isDown reports whether Redis failed less than Backoff ago.
func (s *Store) isDown() bool { return time.Now().UnixNano() < s.downUntil.Load() }

// failed notes a failed round trip (logged: at most failuresToDown lines
// per Backoff). After failuresToDown of them in a row (one alone may be a
// stall of this process, not of Redis), Redis is left alone for Backoff.
func (s *Store) failed(op string, err error) {
	n := s.fails.Add(1)
	s.opts.Logger.Warn().Err(err).Str("op", op).Int32("in_a_row", n).
		Msg("attribution store round trip failed: answering from this replica's memory")
	if n < failuresToDown {
		return
	}
	s.fails.Store(0)
	if s.downUntil.Swap(time.Now().Add(s.opts.Backoff).UnixNano()) < time.Now().UnixNano() {
		s.opts.Logger.Warn().Str("op", op).Dur("backoff", s.opts.Backoff).
			Msg("attribution store unreachable: not asked again during the backoff")
	}
}

// succeeded notes a round trip that worked.
func (s *Store) succeeded() {
	if s.fails.Load() != 0 {
		s.fails.Store(0)
	}
}
