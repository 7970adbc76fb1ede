package redisstore

import "github.com/redis/go-redis/v9"

// recordScript records one entry atomically, with the in-process store's
// rules: a key recorded again with the same origin gets a fresh TTL, with
// another origin it becomes ambiguous; a new key whose id the session's
// filter may have seen before is ambiguous from the start (when ARGV[4] and
// ARGV[5] are given); the session's list of entries is trimmed to the
// per-session cap, oldest first, deleting what it drops. Every key it
// touches gets the TTL.
//
// KEYS: entry, session list, session filter. ARGV: value, TTL in
// milliseconds, per-session cap, filter bits (optional).
var recordScript = redis.NewScript(`
local ttl = tonumber(ARGV[2])
local old = redis.call('GET', KEYS[1])
if old then
  if old ~= ARGV[1] then old = '!' end
  redis.call('SET', KEYS[1], old, 'PX', ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  return 0
end
local v = ARGV[1]
if ARGV[4] then
  local a = redis.call('SETBIT', KEYS[3], ARGV[4], 1)
  local b = redis.call('SETBIT', KEYS[3], ARGV[5], 1)
  redis.call('PEXPIRE', KEYS[3], ttl)
  if a == 1 and b == 1 then v = '!' end
end
redis.call('SET', KEYS[1], v, 'PX', ttl)
redis.call('RPUSH', KEYS[2], KEYS[1])
redis.call('PEXPIRE', KEYS[2], ttl)
local cap = tonumber(ARGV[3])
while redis.call('LLEN', KEYS[2]) > cap do
  local ev = redis.call('LPOP', KEYS[2])
  if ev ~= KEYS[1] then redis.call('DEL', ev) end
end
return 0
`)

// forgetScript deletes every entry of a session, its lists and its filter.
//
// KEYS: request list, task list, request filter.
var forgetScript = redis.NewScript(`
for i = 1, 2 do
  local ks = redis.call('LRANGE', KEYS[i], 0, -1)
  for _, k in ipairs(ks) do redis.call('DEL', k) end
  redis.call('DEL', KEYS[i])
end
redis.call('DEL', KEYS[3])
return 0
`)
