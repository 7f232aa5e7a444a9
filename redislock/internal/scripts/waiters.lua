-- waiters.lua: count the waiters whose place in the queue has not lapsed
-- (after queue.lua). Writes nothing.
--
-- Returns the count.
local now = now_ms()
local n = 0
for _, o in ipairs(redis.call('lrange', KEYS[3], 0, -1)) do
  local deadline = entry(redis.call('hget', KEYS[4], o))
  if deadline and deadline >= now then
    n = n + 1
  end
end
return n
