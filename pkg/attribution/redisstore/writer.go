package redisstore

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kinds of queued writes.
const (
	writeRequest = iota
	writeTask
	writeForget
)

// write is one queued change to Redis.
type write struct {
	kind    int
	session string
	key     string // the entry (not for writeForget)
	value   string
	seq     uint64 // its place in the queue (Store.seq)
}

// writer owns the queue: it sends queued writes in pipelines of up to
// maxBatch until Close, then flushes what is left once.
func (s *Store) writer() {
	defer close(s.done)
	batch := make([]write, 0, maxBatch)
	for {
		select {
		case w := <-s.queue:
			batch = s.fill(append(batch[:0], w))
			s.flush(batch)
		case <-s.stop:
			batch = s.fill(batch[:0])
			if len(batch) > 0 {
				s.flush(batch)
			}
			return
		}
	}
}

// fill adds the queued writes to batch without waiting, up to maxBatch.
func (s *Store) fill(batch []write) []write {
	for len(batch) < maxBatch {
		select {
		case w := <-s.queue:
			batch = append(batch, w)
		default:
			return batch
		}
	}
	return batch
}

// flush sends batch in one pipeline bounded by OpTimeout. A failure (or a
// backoff in force) drops the batch: the local Memory still has it.
func (s *Store) flush(batch []write) {
	defer s.finished(batch[len(batch)-1].seq)
	if s.isDown() {
		for range batch {
			s.obs.StoreFallback("write", "down")
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.OpTimeout)
	defer cancel()
	start := time.Now()
	err := s.pipeline(ctx, batch)
	if isNoScript(err) { // Redis restarted empty: load the scripts, once
		if err = s.loadScripts(ctx); err == nil {
			err = s.pipeline(ctx, batch)
		}
	}
	s.obs.StoreOp("write", time.Since(start), err)
	if err != nil {
		s.failed("write", err)
		for range batch {
			s.obs.StoreFallback("write", "error")
		}
		return
	}
	s.succeeded()
}

// loadScripts loads the scripts into Redis (after a start or a SCRIPT
// FLUSH, EVALSHA answers NOSCRIPT).
func (s *Store) loadScripts(ctx context.Context) error {
	for _, sc := range []*redis.Script{recordScript, forgetScript} {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return err
		}
	}
	return nil
}

// pipeline runs the scripts of batch in one pipeline.
func (s *Store) pipeline(ctx context.Context, batch []write) error {
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range batch {
			s.queueWrite(ctx, p, &batch[i])
		}
		return nil
	})
	return err
}

// queueWrite adds the script call of w to p.
func (s *Store) queueWrite(ctx context.Context, p redis.Pipeliner, w *write) {
	b := &s.opts.Bounds
	switch w.kind {
	case writeRequest:
		fa, fb := filterPositions(w.key)
		recordScript.EvalSha(ctx, p,
			[]string{w.key, s.keys.session("ri", w.session), s.keys.session("rs", w.session)},
			w.value, b.RequestTTL.Milliseconds(), b.MaxRequestsPerSession, fa, fb)
	case writeTask:
		recordScript.EvalSha(ctx, p,
			[]string{w.key, s.keys.session("ti", w.session), s.keys.session("rs", w.session)},
			w.value, b.TaskTTL.Milliseconds(), b.MaxTasksPerSession)
	case writeForget:
		forgetScript.EvalSha(ctx, p,
			[]string{s.keys.session("ri", w.session), s.keys.session("ti", w.session), s.keys.session("rs", w.session)})
	}
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
