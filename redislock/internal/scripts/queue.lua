-- queue.lua: the queue of a lock's waiters. Not a script of its own:
-- scripts.go puts it into queue_acquire.lua, queue_release.lua,
-- forcerelease.lua, reserve.lua and waiters.lua, at their line
-- "-- [queue.lua]" or else in front of them; they all take the same keys:
--
-- KEYS[1]  the lock: a hash {owner, token, last, inbox, queued} with the
--          lease as its expiry; last is the highest token reserved for
--          the owner's Driver, inbox that Driver's channel ("": none),
--          queued set once another Driver's waiter was told to it (see
--          grant and queue_acquire.lua)
-- KEYS[2]  the fence counter of the name; it never expires
-- KEYS[3]  the queue: a list of waiting owners, the oldest first
-- KEYS[4]  the waiters: a hash of owner -> "<deadline> <lease> <inbox>";
--          deadline (Redis time) and lease in ms, inbox the pub/sub
--          channel of the waiter's Driver (may be empty). A waiter's place
--          lapses at its deadline unless the waiter renews it, so a
--          crashed waiter is skipped, not granted.
--
-- A lock that is released, expires or is freed by force goes to the
-- oldest live waiter at once (a hand-off): the script that finds it free
-- grants it and publishes "<token> <owner>" on the waiter's inbox.

local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- entry splits a waiter's entry into deadline, lease and inbox; nil if
-- it is not one.
local function entry(e)
  if not e then
    return nil
  end
  local deadline, lease, inbox = string.match(e, '^(%d+) (%d+) (.*)$')
  if not deadline then
    return nil
  end
  return tonumber(deadline), lease, inbox
end

-- head returns the oldest waiter whose place has not lapsed, its lease
-- and its inbox, after taking lapsed ones off the queue; nil when nobody
-- waits. now is the time in ms, or nil to read it only if someone waits
-- (TIME is a call, and most locks have no waiters).
local function head(now)
  while true do
    local o = redis.call('lindex', KEYS[3], 0)
    if not o then
      return nil
    end
    now = now or now_ms()
    local deadline, lease, inbox = entry(redis.call('hget', KEYS[4], o))
    if deadline and deadline >= now then
      return o, lease, inbox
    end
    redis.call('lpop', KEYS[3])
    redis.call('hdel', KEYS[4], o)
  end
end

-- dequeue takes the head o off the queue.
local function dequeue(o)
  redis.call('lpop', KEYS[3])
  redis.call('hdel', KEYS[4], o)
end

-- foreign tells whether one of the first 64 live waiters in the queue
-- waits through another Driver than the one whose inbox is given.
local function foreign(inbox)
  local now = now_ms()
  for _, o in ipairs(redis.call('lrange', KEYS[3], 0, 63)) do
    local deadline, _, ib = entry(redis.call('hget', KEYS[4], o))
    if deadline and deadline >= now and ib ~= inbox then
      return true
    end
  end
  return false
end

-- grant gives the lock to owner for lease ms, with the next k fencing
-- tokens: the first is the hold's, the others are reserved for the holds
-- that the owner's Driver passes the lock to without freeing it. inbox is
-- the owner's Driver's channel, told when another Driver's waiter queues.
-- When another Driver's waiter already waits, only one token is taken:
-- the lock is not to be passed on before that waiter had it. It returns
-- the first token and the last.
local function grant(owner, lease, k, inbox)
  local queued = false
  if k > 1 and foreign(inbox) then
    k = 1
    queued = true
  end
  local last = redis.call('incrby', KEYS[2], k)
  local first = last - k + 1
  redis.call('hset', KEYS[1], 'owner', owner, 'token', first, 'last', last, 'inbox', inbox)
  if queued then
    redis.call('hset', KEYS[1], 'queued', '1')
  else
    redis.call('hdel', KEYS[1], 'queued')
  end
  redis.call('pexpire', KEYS[1], lease)
  return first, last
end

-- BLOCK is how many tokens a grant reserves for a waiter whose Driver
-- listens (it has an inbox), and reserve.lua adds: enough for the passes
-- of a busy lock in the time a reserve.lua call takes. The grant before
-- queue.lua in queue_acquire.lua reserves as many.
local BLOCK = 64

-- grant_reply is the {2, token, last, pttl} of a hold found in the hash,
-- with its remaining lease (so that the caller dates it exactly). A 'last'
-- below the token (written by an older version, or absent) is the token
-- itself: no tokens are reserved.
local function grant_reply()
  local cur = redis.call('hmget', KEYS[1], 'token', 'last')
  local token = tonumber(cur[1]) or 0
  return {2, token, math.max(token, tonumber(cur[2]) or 0), redis.call('pttl', KEYS[1])}
end

-- hand_off gives the lock to the oldest live waiter and tells it on its
-- inbox: "<token> <owner>", or "<token>-<last> <owner>" when tokens up to
-- last are reserved for it. It returns false, changing nothing, when
-- nobody waits.
local function hand_off(now)
  local o, lease, inbox = head(now)
  if not o then
    return false
  end
  dequeue(o)
  local k = 1
  if inbox ~= '' then
    k = BLOCK
  end
  local first, last = grant(o, lease, k, inbox)
  if inbox ~= '' then
    local tok = first
    if last > first then
      tok = first .. '-' .. last
    end
    redis.call('publish', inbox, tok .. ' ' .. o)
  end
  return true
end

-- place puts owner in the queue at the back, or renews its place there:
-- the place lasts window ms from now unless renewed.
local function place(owner, lease, window, inbox, now)
  if redis.call('hexists', KEYS[4], owner) == 0 then
    redis.call('rpush', KEYS[3], owner)
  end
  redis.call('hset', KEYS[4], owner, (now + window) .. ' ' .. lease .. ' ' .. inbox)
  -- Both keys outlive every place in them, and go when nobody waits.
  redis.call('pexpire', KEYS[3], window + 1000)
  redis.call('pexpire', KEYS[4], window + 1000)
end

-- free lets the lock go: to the next waiter, or to nobody.
local function free()
  if not hand_off(nil) then
    redis.call('del', KEYS[1])
  end
end

