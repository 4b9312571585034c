-- Shared by every script: integer checks, formatting, the clock, expiry
-- (A rule's constant is named C.<NAME>: generate.py writes its value there.)
local MAXT = C.MAXT
-- Every number here is a whole number of at most 2^53 (µs, counts). Each
-- call of a C function costs (Redis's Lua): checks are one find each.
local find, tonumber = string.find, tonumber
-- The values written most (-1: none, 0, 1) cost no C call, here and in int;
-- nor does the last one formatted, again (a decision writes its time in
-- several places).
local fmt_x, fmt_s
local function fmt(x)
  if x == -1 then return '-1' elseif x == 0 then return '0' elseif x == 1 then return '1' end
  if x ~= fmt_x then fmt_x, fmt_s = x, string.format('%d', x) end
  return fmt_s
end
-- A string of digits (a '-' first allowed) within lo..hi, or nil. (Its
-- number is `v + 0`: tonumber reads a string twice, once to ask whether it
-- is a number.)
local function int(v, lo, hi)
  local n
  if v == '-1' then n = -1 elseif v == '0' then n = 0 elseif v == '1' then n = 1
  else
    if not v or #v > 17 or not find(v, '^%-?%d+$') then return nil end
    n = v + 0
  end
  if n < lo or n > hi then return nil end
  return n
end
-- digits: a string already matched as digits, within lo..hi, or nil.
local function digits(v, lo, hi)
  if #v > 17 then return nil end
  local n = v == '0' and 0 or v + 0
  if n < lo or n > hi then return nil end
  return n
end
-- The store's clock: the server's TIME plus the correction kept in the
-- clock key, the last of every script's KEYS (NK: the keys before it).
-- Engines set the correction when a failover brings a primary whose clock
-- differs from the old one's (RedisClock.swift), so the store's time runs
-- on without a jump.
-- A script is one step at one instant: the time is read once (a guarded
-- send's screen and its decision share it).
local CLOCK, NK = KEYS[#KEYS], #KEYS - 1
local skew, read_at
local function store_time()
  if read_at then return read_at end
  if not skew then
    -- "RUNID:VALUE" (the primary it was set for, and µs), or none.
    local held = redis.call('GET', CLOCK)
    skew = 0
    if held then
      skew = int(string.match(held, '^[%x]*:?(%-?%d+)$'), -C.DAY, C.DAY)
      if not skew then return error('the clock key holds ' .. string.sub(held, 1, 40)) end
    end
  end
  local t = redis.call('TIME')
  read_at = t[1] * 1000000 + t[2] + skew
  return read_at
end
-- now: the decision's time (ARGV's, or the store's), real: the store's.
local function clock(a)
  local real = store_time()
  if a == '' then return real, real end
  return tonumber(a), real
end
-- True past the call's deadline (store µs; '' = none).
local function late(not_after)
  if not_after == '' then return false end
  return store_time() > tonumber(not_after)
end
local function expire(key, life_us, now, slack_ms)
  local ms = math.ceil((life_us - now) / 1000) + slack_ms
  if ms < 1 then ms = 1 end
  redis.call('PEXPIRE', key, fmt(ms))
end
-- Appends a record the engine formatted to a guard's capped record stream
-- (XADD MAXLEN ~ most, as guard_record.lua): args[from...] are field,
-- value, ...; a value whose first byte is 1, 2 or 3 refers to what the
-- script knows and the engine did not: fill(mark, rest) gives it (nil:
-- the field is left out); byte 0 first escapes a value that is what
-- follows it (a scope may begin with any byte). Best effort, as every
-- record: an error (a key that is not a stream) changes nothing.
local function append_record(stream, most, args, from, fill)
  local fields = {}
  for j = from, #args - 1, 2 do
    local v = args[j + 1]
    local mark = string.byte(v, 1)
    if mark == 0 then v = string.sub(v, 2) elseif mark and mark <= 3 then v = fill(mark, string.sub(v, 2)) end
    if v ~= nil then
      fields[#fields + 1] = args[j]
      fields[#fields + 1] = type(v) == 'number' and fmt(v) or v
    end
  end
  redis.pcall('XADD', stream, 'MAXLEN', '~', fmt(most), '*', unpack(fields))
end
-- A hash's type must be hash (or absent): anything else is not Tickgate's.
local function hash_or_none(key)
  local t = redis.call('TYPE', key).ok
  return t == 'hash' or t == 'none'
end
-- A send policy "c1,c2|max|window|quiet|ticket|wrong" (spans in µs).
local function policy(text)
  if type(text) ~= 'string' or #text > 1024 then return nil end
  local steps, wmax, window, quiet, ticket, wrong =
    string.match(text, '^([%d,]+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
  if not steps then return nil end
  local cooldowns = {}
  if not find(steps, ',', 1, true) then
    -- One step (no comma): itself, without a walk of its parts.
    cooldowns[1] = digits(steps, 1, C.YEAR)
    if not cooldowns[1] then return nil end
  else
    for part in string.gmatch(steps, '[^,]+') do
      local v = digits(part, 1, C.YEAR)
      if not v then return nil end
      cooldowns[#cooldowns + 1] = v
    end
  end
  if #cooldowns == 0 or #cooldowns > C.MAX_STEPS then return nil end
  local p = {cooldowns = cooldowns, wmax = digits(wmax, 0, C.MAX_WINDOW_SENDS), window = digits(window, 0, C.YEAR),
             quiet = digits(quiet, 0, C.YEAR), ticket = digits(ticket, 1, C.YEAR),
             wrong = digits(wrong, 0, C.MAX_WRONG_CODES)}
  if not p.wmax or not p.window or not p.quiet or not p.ticket or not p.wrong then return nil end
  return p
end
-- A budget "SENDS/MS,..." -> its windows (lengths in µs) and horizon.
local function budget(text)
  if type(text) ~= 'string' or #text > 256 then return nil end
  local b = {windows = {}, horizon = 0}
  for part in string.gmatch(text, '[^,]+') do
    local cap, ms = string.match(part, '^(%d+)/(%d+)$')
    cap, ms = int(cap, 1, C.MAX_BUDGET_SENDS), int(ms, 1, C.YEAR / 1000)
    if not cap or not ms then return nil end
    b.windows[#b.windows + 1] = {cap = cap, len = ms * 1000}
    if ms * 1000 > b.horizon then b.horizon = ms * 1000 end
  end
  if #b.windows == 0 or #b.windows > C.MAX_BUDGET_WINDOWS then return nil end
  return b
end
