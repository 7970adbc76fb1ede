package ratelimit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts count atomically, one round trip per dimension, on the
// server's clock (TIME), so that sidecars with skewed clocks share one
// budget.
var (
	// KEYS[1] counter; ARGV[1] window ms. → {count, ttl ms}
	fixedScript = redis.NewScript(`
local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[1]); ttl = tonumber(ARGV[1]) end
return {c, ttl}
`)
	// KEYS[1] sorted set of request times (µs); ARGV[1] window ms, ARGV[2]
	// limit. → {allowed, count, ms until the oldest leaves}
	slidingScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local win = tonumber(ARGV[1]) * 1000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - win)
local c = redis.call('ZCARD', KEYS[1])
local allowed = 0
if c < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, t[1] .. '.' .. t[2] .. '.' .. c)
  c = c + 1
  allowed = 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local reset = 0
if oldest[2] then reset = math.ceil((tonumber(oldest[2]) + win - now) / 1000) end
return {allowed, c, reset}
`)
	// KEYS[1] hash {tokens, ts}; ARGV[1] capacity, ARGV[2] window ms.
	// → {allowed, tokens left (floor), ms until the next token}
	bucketScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cap = tonumber(ARGV[1])
local per = cap / tonumber(ARGV[2])
local h = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(h[1]) or cap
local ts = tonumber(h[2]) or now
tokens = math.min(cap, tokens + math.max(0, now - ts) * per)
local allowed = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local wait = 0
if tokens < 1 then wait = math.ceil((1 - tokens) / per) end
return {allowed, math.floor(tokens), wait}
`)
)

// redisStore is the store shared by the sidecars (and gateways) that use
// one Redis or Valkey.
type redisStore struct {
	rdb       *redis.Client
	closeOnce sync.Once
	closeErr  error
}

func newRedis(url string) (*redisStore, error) {
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("not a Redis URL: %w", err)
	}
	opts.DisableIdentity = true // no CLIENT SETINFO: Valkey and older servers
	return &redisStore{rdb: redis.NewClient(opts)}, nil
}

// Hit implements Store.
func (s *redisStore) Hit(ctx context.Context, a Algorithm, key string, r Rate) (Decision, error) {
	ms := r.Window.Milliseconds()
	switch a {
	case SlidingWindow:
		v, err := slidingScript.Run(ctx, s.rdb, []string{key}, ms, r.Count).Int64Slice()
		if err != nil {
			return Decision{}, fmt.Errorf("rate_limiter redis: %w", err)
		}
		return Decision{Allowed: v[0] == 1, Remaining: max(r.Count-int(v[1]), 0), ResetIn: time.Duration(v[2]) * time.Millisecond}, nil
	case TokenBucket:
		v, err := bucketScript.Run(ctx, s.rdb, []string{key}, r.Count, ms).Int64Slice()
		if err != nil {
			return Decision{}, fmt.Errorf("rate_limiter redis: %w", err)
		}
		return Decision{Allowed: v[0] == 1, Remaining: int(v[1]), ResetIn: time.Duration(v[2]) * time.Millisecond}, nil
	}
	v, err := fixedScript.Run(ctx, s.rdb, []string{key}, ms).Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("rate_limiter redis: %w", err)
	}
	return Decision{Allowed: int(v[0]) <= r.Count, Remaining: max(r.Count-int(v[0]), 0), ResetIn: time.Duration(v[1]) * time.Millisecond}, nil
}

// Close implements Store.
func (s *redisStore) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.rdb.Close() })
	return s.closeErr
}
