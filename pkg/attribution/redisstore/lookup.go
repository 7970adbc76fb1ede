package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-extproc/mcp-extproc/pkg/attribution"
)

// Lookup implements [attribution.Store.Lookup]. The Memory answers first; an
// id it does not know is looked up in Redis. An id it knows is checked there
// too, since a client can reuse an id through another replica: if Redis has
// it as ambiguous or with another origin, it is ambiguous, as a single
// sidecar would have found. Without Redis the Memory's answer stands.
func (s *Store) Lookup(ctx context.Context, session string, id []byte) (attribution.Origin, error) {
	local, err := s.local.Lookup(ctx, session, id)
	if err != nil && !errors.Is(err, attribution.ErrUnknown) {
		return attribution.Origin{}, err // ambiguous or invalid: final
	}
	canon, cerr := attribution.CanonicalID(id)
	if cerr != nil {
		return attribution.Origin{}, cerr
	}
	remote, rerr := s.get(ctx, "lookup", s.keys.request(session, canon))
	switch {
	case err == nil && (rerr == nil && remote != local || errors.Is(rerr, attribution.ErrAmbiguous)):
		return attribution.Origin{}, attribution.ErrAmbiguous
	case err == nil:
		return local, nil
	case rerr != nil:
		return attribution.Origin{}, unusable(rerr)
	}
	return remote, nil
}

// LookupTask implements [attribution.Store.LookupTask]: the Memory first,
// then Redis; a task found there is kept in the Memory (tasks are polled).
// Task ids are the server's, not the client's: a task the Memory knows is
// not checked in Redis.
func (s *Store) LookupTask(ctx context.Context, session, taskID string) (attribution.Origin, error) {
	o, err := s.local.LookupTask(ctx, session, taskID)
	if !errors.Is(err, attribution.ErrUnknown) {
		return o, err
	}
	o, err = s.get(ctx, "lookup_task", s.keys.task(session, taskID))
	if err != nil {
		return attribution.Origin{}, unusable(err)
	}
	if err := s.local.RecordTask(ctx, session, taskID, o); err != nil {
		s.opts.Logger.Debug().Err(err).Msg("task from the shared store not kept locally")
	}
	return o, nil
}

// errRemote marks a failed or skipped round trip in get's answer.
var errRemote = errors.New("redisstore: shared store not reachable")

// unusable maps get's error to what a caller sees: ErrAmbiguous stays,
// everything else (not found, unreachable, a foreign value) is ErrUnknown.
func unusable(err error) error {
	if errors.Is(err, attribution.ErrAmbiguous) {
		return err
	}
	return attribution.ErrUnknown
}

// get reads one entry, bounded by OpTimeout: the origin, or ErrUnknown,
// ErrAmbiguous, errCorrupt, or errRemote when Redis did not answer (or is
// in its backoff).
func (s *Store) get(ctx context.Context, op, key string) (attribution.Origin, error) {
	if s.isDown() {
		s.obs.StoreFallback(op, "down")
		return attribution.Origin{}, errRemote
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	start := time.Now()
	v, err := s.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		s.obs.StoreOp(op, time.Since(start), nil)
		s.succeeded()
		return attribution.Origin{}, attribution.ErrUnknown
	}
	s.obs.StoreOp(op, time.Since(start), err)
	if err != nil {
		if ctx.Err() == nil || errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			s.failed(op, err) // not the caller giving up
		}
		s.obs.StoreFallback(op, "error")
		return attribution.Origin{}, errRemote
	}
	s.succeeded()
	return decodeOrigin(v)
}
