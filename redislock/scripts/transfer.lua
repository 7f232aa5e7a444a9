-- transfer.lua: record in Redis that a Driver passed a lock from one of
-- its holds to the next of its own waiters without freeing it (after
-- queue.lua). The waiter already holds the lock in its process, with a
-- token that the holder's grant reserved; this script makes Redis agree.
--
-- ARGV[1]  the owner that held the lock
-- ARGV[2]  the waiter it was passed to
-- ARGV[3]  the waiter's token: above the holder's, at most the last
--          reserved
-- ARGV[4]  the waiter's lease, in ms
-- ARGV[5]  how many more tokens to reserve when fewer are left
--
-- Returns {1, next, last}: the next token the Driver may pass and the last
-- one reserved; or {0, 0, 0} when the lock is not (or no longer) the
-- holder's, or the token was not reserved: nothing is changed, and the
-- waiter's hold is not in Redis (its next renewal or release finds it
-- lost).
local cur = redis.call('hmget', KEYS[1], 'owner', 'token', 'last')
local token = tonumber(ARGV[3])
local last = tonumber(cur[3]) or 0
if cur[1] ~= ARGV[1] or token <= (tonumber(cur[2]) or 0) or token > last then
  return {0, 0, 0}
end
local nxt = token + 1
local k = tonumber(ARGV[5])
if last - token < k then
  -- Nothing else takes tokens while the lock is held, so the counter is
  -- at last and the new ones follow on; if it is not, the next token is
  -- the first of the new ones.
  local top = redis.call('incrby', KEYS[2], k)
  if top - k ~= last then
    nxt = top - k + 1
  end
  last = top
end
redis.call('hset', KEYS[1], 'owner', ARGV[2], 'token', token, 'last', last)
redis.call('pexpire', KEYS[1], ARGV[4])
redis.call('lrem', KEYS[3], 1, ARGV[2])
redis.call('hdel', KEYS[4], ARGV[2])
return {1, nxt, last}
