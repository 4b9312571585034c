-- A realm's session: KEYS[1] holds "END|TTL" (µs; END -1: no expiry) and
-- expires with the session; a logout deletes it. ARGV: 1 'in' or 'out',
-- 2 now ('' = TIME), 3 TTL µs (0: no expiry), 4 channel, 5 notice, 6 not
-- after (server µs). Answers {'ok', now, real, end}, or {'late'} (past the
-- deadline: nothing changed).
local now, real = clock(ARGV[2])
if late(ARGV[6]) then return {'late'} end
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'string' and t ~= 'none' then return {'corrupt', KEYS[1], 'is not a string'} end
local untl = -1
if ARGV[1] == 'in' then
  local ttl = tonumber(ARGV[3])
  if ttl > 0 then
    untl = now + ttl
    if ARGV[2] == '' then
      redis.call('SET', KEYS[1], fmt(untl) .. '|' .. fmt(ttl), 'PX', fmt(math.ceil(ttl / 1000)))
    else
      -- On the engines' clock (tests): it ends by that clock, not Redis's.
      redis.call('SET', KEYS[1], fmt(untl) .. '|' .. fmt(ttl))
    end
  else
    redis.call('SET', KEYS[1], '-1|0')
  end
else
  redis.call('DEL', KEYS[1])
end
if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], ARGV[5]) end
return {'ok', now, real, untl}
