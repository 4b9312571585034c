-- Ends the countdown of each key given if it runs (a scope-wide cancel, one
-- batch of keys). ARGV: 1 now ('' = TIME), 2 channel, 3 not after (server
-- µs), 4... notices (one per key). Answers how many it ended, or -1 (past
-- the deadline: nothing changed).
local now = clock(ARGV[1])
if late(ARGV[3]) then return -1 end
local ended = 0
for j = 1, NK do
  local K = KEYS[j]
  if redis.call('TYPE', K).ok == 'hash' then
    local d = int(redis.call('HGET', K, 'd'), 0, MAXT)
    if d and d > now then
      if redis.call('HGET', K, 'h') == '-1' then
        -- Nothing left: the fields go (the key with them, unless engines'
        -- answers kept for a retry are still there).
        redis.call('HDEL', K, 'd', 'p', 'l', 'i', 'c', 'k', 'h', 'n', 'w', 'x', 's', 't')
      else
        redis.call('HSET', K, 'd', '-1', 'p', '-1', 'l', '-1', 'i', '-1', 'c', '-1', 'k', '')
      end
      ended = ended + 1
      if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[3 + j]) end
    end
  end
end
return ended
