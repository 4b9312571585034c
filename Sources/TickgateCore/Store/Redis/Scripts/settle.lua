-- On a Redis Cluster, the last step of a send whose budget keys live in
-- other slots (Scripts/reserve.lua): 'commit' makes a reservation a charge
-- (it leaves the reservations; it stays in the budget's set, where it
-- already counted), 'release' drops it from both (a refused send, or a
-- failed send giving its charge back). KEYS: 1 the budget key's charges,
-- 2 its reservations. ARGV: 1 'commit' or 'release', 2 the member.
-- Answers {'ok'}, or {'lost'} (a commit found neither: the reservation
-- expired first, and the grant goes uncharged). Settling twice is the
-- same as once.
local B, RS = KEYS[1], KEYS[2]
local t = redis.call('TYPE', B).ok
if t ~= 'zset' and t ~= 'none' then return {'corrupt', B, 'is not a sorted set'} end
t = redis.call('TYPE', RS).ok
if t ~= 'zset' and t ~= 'none' then return {'corrupt', RS, 'is not a sorted set'} end
if ARGV[1] == 'commit' then
  local held = redis.call('ZREM', RS, ARGV[2])
  if held == 0 and not redis.call('ZSCORE', B, ARGV[2]) then return {'lost'} end
  return {'ok'}
end
redis.call('ZREM', B, ARGV[2])
redis.call('ZREM', RS, ARGV[2])
return {'ok'}
