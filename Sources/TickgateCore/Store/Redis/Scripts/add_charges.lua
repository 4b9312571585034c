-- On a Redis Cluster, the budget part of a write-back (Scripts/merge.lua):
-- every charge an engine made by itself while the store was out of reach
-- becomes the store's. KEYS: 1 a budget key. ARGV: 1 now ('' = TIME),
-- 2 the charges ("t1,t2", µs), 3 the engine's name. Answers {'ok'} or
-- {'corrupt', key, why}. Adding twice is the same as once.
local now = clock(ARGV[1])
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'zset' and t ~= 'none' then return {'corrupt', KEYS[1], 'is not a sorted set'} end
for part in string.gmatch(ARGV[2], '[^,]+') do
  local v = int(part, 0, MAXT)
  if v and v <= now then redis.call('ZADD', KEYS[1], 'NX', fmt(v), fmt(v) .. '-' .. ARGV[3]) end
end
-- A key made here lives as long as a budget's longest window may.
if redis.call('PTTL', KEYS[1]) == -1 then redis.call('PEXPIRE', KEYS[1], 31622400000) end
return {'ok'}
