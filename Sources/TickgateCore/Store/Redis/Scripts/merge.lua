-- Writes back what an engine granted by itself while the store was out of
-- reach ("fail open"), merged so that the stricter state wins: the later of
-- the two countdowns, the union of the sends, the larger escalation, and
-- every charge. KEYS: 1 the key's hash, 2 the settings hash, 3... budget
-- keys. ARGV: 1 now ('' = TIME), 2 not after (server µs), 3 slack ms,
-- 4 channel, 5 notice, 6 the default policy, 7 the scope, 8 the countdown's
-- deadline (-1: none), 9 its phase, 10 its duration, 11 its tick, 12 the
-- last send (-1: no record), 13 consecutive sends, 14 the sends in the
-- window ("t1,t2"), 15... the charges of each budget key ("t1,t2"), 15 + #
-- budget keys the engine's name. Answers {'ok'}, {'late'} or
-- {'corrupt', key, why}. Merging twice is the same as once.
local K, S = KEYS[1], nil
if NK >= 2 then S = KEYS[2] end
local now = clock(ARGV[1])
if late(ARGV[2]) then return {'late'} end
local slack = tonumber(ARGV[3])
if not hash_or_none(K) then return {'corrupt', K, 'is not a hash'} end
local pol = policy(ARGV[6])
local stored = S and redis.call('HGET', S, 'p:' .. ARGV[7])
if stored then pol = policy(stored) end
if not pol then return {'corrupt', S or K, 'field "p:' .. string.sub(ARGV[7], 1, 40) .. '" is not a policy'} end
local h = {}
local raw = redis.call('HGETALL', K)
for j = 1, #raw, 2 do h[raw[j]] = raw[j + 1] end
local function num(f) return int(h[f], -1, MAXT) or -1 end
local f = {d = num('d'), p = num('p'), l = num('l'), i = num('i'), c = num('c'), k = h.k or '',
           h = num('h'), n = num('n'), w = num('w'), x = num('x'), s = num('s'), t = h.t or ''}
if f.d <= now then f.d, f.p, f.l, f.i, f.c, f.k = -1, -1, -1, -1, -1, '' end
-- The countdown: the later one stands.
local d = tonumber(ARGV[8])
if d > now and d > f.d then
  f.d, f.p, f.l, f.i, f.c, f.k = d, tonumber(ARGV[9]), tonumber(ARGV[10]), tonumber(ARGV[11]), -1, ''
end
-- The record: the union of the sends, the larger escalation, the later send.
local last = tonumber(ARGV[12])
if last >= 0 then
  if f.h < 0 then f.h, f.n, f.w, f.x, f.s, f.t = 1, 0, 0, 0, -1, '' end
  f.h = 1
  f.n = math.max(f.n, tonumber(ARGV[13]))
  f.s = math.max(f.s, last)
  local seen, all = {}, {}
  for _, list in ipairs({f.t, ARGV[14]}) do
    for part in string.gmatch(list, '[^,]+') do
      local v = int(part, 0, MAXT)
      if v and not seen[v] then
        seen[v] = true
        all[#all + 1] = v
      end
    end
  end
  table.sort(all)
  all = R.prune(all, pol.wmax, pol.window, now)
  local text = {}
  for j, v in ipairs(all) do text[j] = fmt(v) end
  f.t = table.concat(text, ',')
end
if f.d < 0 and f.h < 0 then return {'ok'} end
redis.call('HSET', K, 'd', fmt(f.d), 'p', tostring(f.p), 'l', fmt(f.l), 'i', fmt(f.i), 'c', fmt(f.c), 'k', f.k,
  'h', tostring(f.h), 'n', fmt(f.n), 'w', tostring(f.w), 'x', tostring(f.x), 's', fmt(f.s), 't', f.t)
-- The key lives as long as a decision through the store would keep it.
local newest = -1
for part in string.gmatch(f.t, '[^,]+') do newest = math.max(newest, int(part, 0, MAXT) or -1) end
expire(K, math.max(R.key_life(f.d, f.s, newest, pol.quiet, pol.window, now), now), now, slack)
-- Every charge made meanwhile is the store's too.
local engine = ARGV[15 + NK - 2]
for j = 3, NK do
  local t = redis.call('TYPE', KEYS[j]).ok
  if t ~= 'zset' and t ~= 'none' then return {'corrupt', KEYS[j], 'is not a sorted set'} end
  for part in string.gmatch(ARGV[12 + j], '[^,]+') do
    local v = int(part, 0, MAXT)
    if v and v <= now then redis.call('ZADD', KEYS[j], 'NX', fmt(v), fmt(v) .. '-' .. engine) end
  end
  -- A key made here lives as long as a budget's longest window may.
  if redis.call('PTTL', KEYS[j]) == -1 then redis.call('PEXPIRE', KEYS[j], 31622400000) end
end
if ARGV[4] ~= '' then
  redis.call('PUBLISH', ARGV[4], ARGV[5])
  -- More charges: a budget known spent may free later than was known.
  if NK >= 3 then redis.call('PUBLISH', ARGV[4], engine .. ' b') end
end
return {'ok'}
