-- On a Redis Cluster, the first step of a send whose budget keys live in
-- other slots than its key (docs/redis.md, "A decision on a cluster"): holds a place
-- on one budget key if it has room in every window. The reservation is a
-- member of the budget's sorted set at once (so it counts against the cap
-- like a charge) and of the reservations' sorted set, scored by when it
-- expires (real store time): a grant commits it, a refusal releases it
-- (Scripts/settle.lua); one that neither reached (the engine or a primary
-- died between) is dropped by the next reservation on the key after it
-- expires (the reservations' set lives as long as the charges' set, so
-- none is left behind as a charge). KEYS: 1 the budget key's charges, 2 its reservations.
-- ARGV: 1 now ('' = TIME), 2 not after (server µs), 3 slack ms, 4 the
-- budget ("SENDS/MS,..." as the settings hold it), 5 the member (the
-- send's ticket name), 6 how long the reservation lives (µs).
-- Answers {'ok', now, real}, {'full', now, real, frees at}, {'late', now,
-- real} (nothing changed) or {'corrupt', key, why}. Reserving twice (a
-- retry) is the same as once.
local B, RS = KEYS[1], KEYS[2]
local now, real = clock(ARGV[1])
if late(ARGV[2]) then return {'late', now, real} end
local b = budget(ARGV[4])
if not b then return {'corrupt', B, 'its budget is not "SENDS/MS,..."'} end
-- Reservations past their time go, from both sets (500 at a time: Lua's
-- unpack has a limit).
while true do
  local gone = redis.pcall('ZRANGEBYSCORE', RS, '-inf', fmt(real), 'LIMIT', 0, 500)
  if gone.err then return {'corrupt', RS, 'is not a sorted set'} end
  if #gone == 0 then break end
  local z = redis.pcall('ZREM', B, unpack(gone))
  if type(z) == 'table' and z.err then return {'corrupt', B, 'is not a sorted set'} end
  redis.call('ZREM', RS, unpack(gone))
end
local z = redis.pcall('ZREMRANGEBYSCORE', B, '-inf', fmt(now - b.horizon))
if type(z) == 'table' and z.err then return {'corrupt', B, 'is not a sorted set'} end
if redis.call('ZSCORE', B, ARGV[5]) then return {'ok', now, real} end
local backs = {}
for _, w in ipairs(b.windows) do
  local got = redis.call('ZREVRANGE', B, w.cap - 1, w.cap - 1, 'WITHSCORES')
  if #got == 2 then
    local at = int(got[2], 0, MAXT)
    if not at then return {'corrupt', B, 'a charge has the score ' .. string.sub(tostring(got[2]), 1, 40)} end
    backs[w.cap] = at
  end
end
local latest = R.budget_frees(b.windows, function(cap) return backs[cap] end, now)
if latest then return {'full', now, real, latest} end
local life = tonumber(ARGV[6])
redis.call('ZADD', B, fmt(now), ARGV[5])
redis.call('ZADD', RS, fmt(real + life), ARGV[5])
expire(B, now + b.horizon, now, tonumber(ARGV[3]))
-- The reservations live as long as the charges that hold them: were they
-- gone first, a reservation never settled would stay a charge.
local want = math.max(math.ceil(life / 1000) + 1000, redis.call('PTTL', B))
if redis.call('PTTL', RS) < want then redis.call('PEXPIRE', RS, fmt(want)) end
return {'ok', now, real}
