package toolpin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a Store shared by the replicas of a gateway through Redis or
// Valkey: one key per pin (SET NX, so the first replica to see a
// definition pins it for all) and one per change mark, each with a TTL
// refreshed when seen. One list costs one pipelined round trip.
type Redis struct {
	rdb    redis.UniversalClient
	prefix string
	ttl    time.Duration
}

// NewRedis returns a Store on rdb, its keys under prefix, each kept ttl
// (DefaultTTL when ≤ 0) after it was last seen. rdb is the caller's to
// close.
func NewRedis(rdb redis.UniversalClient, prefix string, ttl time.Duration) *Redis {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Redis{rdb: rdb, prefix: prefix, ttl: ttl}
}

// key is the key of a pin ("pin") or a change mark ("pinx"); the scope is
// hashed into a Redis Cluster slot of its own.
func (r *Redis) key(what, scope string, kind Kind, name string) string {
	return fmt.Sprintf("%s%s:{%s}:%s:%s", r.prefix, what, scope, kind, name)
}

// pinTTL is how long a pin lives after a Pin last saw it.
func (r *Redis) pinTTL() time.Duration { return r.ttl }

// Pin implements [Store.Pin].
func (r *Redis) Pin(ctx context.Context, scope string, kind Kind, items []Item) ([]Fingerprint, error) {
	gets := make([]*redis.StringCmd, len(items))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, it := range items {
			b, err := json.Marshal(it.FP)
			if err != nil {
				return err
			}
			k := r.key("pin", scope, kind, it.Name)
			p.SetNX(ctx, k, b, r.ttl)
			gets[i] = p.Get(ctx, k)
			p.Expire(ctx, k, r.ttl)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("toolpin: redis pin: %w", err)
	}
	out := make([]Fingerprint, len(items))
	for i, g := range gets {
		b, err := g.Bytes()
		if err != nil {
			continue // not pinned (evicted between the two commands)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			return nil, fmt.Errorf("toolpin: redis pin of %q: %w", items[i].Name, err)
		}
	}
	return out, nil
}

// Mark implements [Store.Mark].
func (r *Redis) Mark(ctx context.Context, scope string, kind Kind, seen []string, changed map[string][]string) error {
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, name := range seen {
			k := r.key("pinx", scope, kind, name)
			members, ok := changed[name]
			if !ok {
				p.Del(ctx, k)
				continue
			}
			b, err := json.Marshal(members)
			if err != nil {
				return err
			}
			p.Set(ctx, k, b, r.ttl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("toolpin: redis mark: %w", err)
	}
	return nil
}

// Changed implements [Store.Changed].
func (r *Redis) Changed(ctx context.Context, scope string, kind Kind, name string) ([]string, error) {
	b, err := r.rdb.Get(ctx, r.key("pinx", scope, kind, name)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("toolpin: redis changed: %w", err)
	}
	var members []string
	if err := json.Unmarshal(b, &members); err != nil {
		return nil, fmt.Errorf("toolpin: redis changed: %w", err)
	}
	return members, nil
}
