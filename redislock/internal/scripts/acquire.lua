-- acquire.lua: take a lock that nobody holds, on one RedLock instance.
-- (A Driver queues its waiters: queue_acquire.lua.)
--
-- KEYS[1]  the lock: a hash {owner, token} with the lease as its expiry
-- KEYS[2]  the fence counter of the name; it never expires, so tokens keep
--          growing after the lock was released and its hash deleted
-- ARGV[1]  the owner (unique per acquisition)
-- ARGV[2]  the lease, in milliseconds
-- ARGV[3]  "1" to take a fencing token from KEYS[2], "0" not to (RedLock)
--
-- Returns {1, token} when granted (token 0 without fencing), or {0, pttl}
-- when another owner holds the lock: the holder's remaining lease in
-- milliseconds, -1 if the key has no expiry (set by hand).
--
-- Reentrancy is not handled here: package locker never asks for a lock that
-- the same owner holds. An owner string is unique to one acquisition, so
-- finding it already there means this very request ran before (a client
-- retried it after losing the reply): the grant is returned again.
local cur = redis.call('hmget', KEYS[1], 'owner', 'token')
if cur[1] == ARGV[1] then
  return {1, tonumber(cur[2]) or 0}
end
if redis.call('exists', KEYS[1]) == 1 then
  return {0, redis.call('pttl', KEYS[1])}
end
local token = 0
if ARGV[3] == '1' then
  token = redis.call('incr', KEYS[2])
end
redis.call('hset', KEYS[1], 'owner', ARGV[1], 'token', token)
redis.call('pexpire', KEYS[1], ARGV[2])
return {1, token}
