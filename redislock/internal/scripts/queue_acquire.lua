-- queue_acquire.lua: take a lock in its waiters' order (with queue.lua).
--
-- ARGV[1]  the owner (unique per acquisition)
-- ARGV[2]  the lease, in ms
-- ARGV[3]  "1" to wait: join the queue, or renew one's place in it; "0"
--          to try once
-- ARGV[4]  how long a place in the queue lasts unless renewed, in ms
-- ARGV[5]  the inbox of the caller's Driver, to be told of a hand-off
--          ("": none, the caller polls)
--
-- Returns {1, token, last} when this call granted the lock, with the last
-- token reserved for the caller's Driver (BLOCK of them when it has an
-- inbox); {2, token, last, pttl} when the owner already holds it (it was
-- handed the lock while it waited, or this very request ran before and a
-- client retried it), with the last token reserved for it and the lease
-- left; {0, pttl, fence,
-- owner, token} when another owner holds it: the holder's remaining lease
-- (-1 if the key has no expiry, set by hand), the fence counter now, and
-- the holder. A grant to the caller that this call did not find was made
-- before it, with a token not above fence: a waiter that receives such a
-- grant's message late (a stalled process) knows it for stale.
--
-- A free lock goes to the caller only if nobody waits or the caller is the
-- oldest waiter; otherwise this call hands it to the oldest one.
-- Reentrancy is not handled here: package locker never asks for a lock
-- that the same owner holds.
--
-- A lock with neither a hash nor a queue, as most locks are most of the
-- time, is granted first, before queue.lua's functions are defined: in a
-- script this short, defining them is a good part of its cost. The grant
-- is grant()'s with nobody queued: the next token, or the next BLOCK with
-- an inbox.
if redis.call('exists', KEYS[1], KEYS[3]) == 0 then
  local k = 1
  if ARGV[5] ~= '' then
    k = 64 -- BLOCK
  end
  local last = redis.call('incrby', KEYS[2], k)
  redis.call('hset', KEYS[1], 'owner', ARGV[1], 'token', last - k + 1, 'last', last, 'inbox', ARGV[5])
  redis.call('pexpire', KEYS[1], ARGV[2])
  return {1, last - k + 1, last}
end
-- [queue.lua]
local owner = redis.call('hget', KEYS[1], 'owner')
if owner == ARGV[1] then
  return grant_reply()
end
-- A hash without an owner (written by hand) counts as free.
if not owner then
  local o = head(nil)
  if not o or o == ARGV[1] then
    if o then
      dequeue(o)
    end
    local k = 1
    if ARGV[5] ~= '' then
      k = BLOCK
    end
    return {1, grant(ARGV[1], ARGV[2], k, ARGV[5])}
  end
  hand_off(nil)
end
if ARGV[3] == '1' then
  place(ARGV[1], ARGV[2], tonumber(ARGV[4]), ARGV[5], now_ms())
  -- The holder's Driver, if it listens and is not the caller's, learns
  -- that another Driver's waiter queues, once per grant: it then stops
  -- passing the lock to its own later waiters.
  local held = redis.call('hmget', KEYS[1], 'inbox', 'queued')
  if held[1] and held[1] ~= '' and held[1] ~= ARGV[5] and not held[2] then
    redis.call('hset', KEYS[1], 'queued', '1')
    redis.call('publish', held[1], 'q ' .. KEYS[1])
  end
end
local cur = redis.call('hmget', KEYS[1], 'owner', 'token')
return {0, redis.call('pttl', KEYS[1]), tonumber(redis.call('get', KEYS[2])) or 0, cur[1] or '', tonumber(cur[2]) or 0}
