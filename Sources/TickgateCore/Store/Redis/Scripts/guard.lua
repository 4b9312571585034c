-- A guarded scope's pumping signals (Pumping/ConversionLedger.swift keeps
-- the same in memory). Every key is in the scope's slot, named from the
-- base B = "P u{SCOPE}" (ARGV 2):
--   B guard      string: the scope's guard, as Guard.encoded writes it
--   B codes      hash: code id -> "COUNTRY|ADDRESS|SENT_US"
--   B latest     hash: subject -> its last code id
--   B prev       hash: code id -> the subject's last code id before it
--   B uc:C       sorted set: country C's unverified codes, by when sent
--                (kept a day and an hour: see `after`), but for those
--                R.counts_in_country leaves out
--   B vc:C       sorted set: country C's verifications, by when
--   B d:C        hash: UTC day number -> codes to C verified that day
--   B ua:A       sorted set: address A's unverified codes, by when sent
--   B va:A       sorted set: address A's verifications, by when
--   B ac:A       hash: country -> when A last asked a code for it
--   B avc:A      hash: country -> when A last verified a code of it
--   B guardx     string: the guard's settings that 0.1.0 does not read:
--                its text, a newline and Guard.extensionText; holds only
--                while its text is B guard's (0.1.0's set leaves it stale)
--   B ur:R       sorted set: number range R's unverified codes, by when
--                sent (as uc:, for a guard with range signals)
--   B vr:R       sorted set: R's verifications, by when
--   B dr:R       hash: UTC day number -> codes of R verified that day
--   B us:S       sorted set: subject S's unverified codes counted in its
--                ranges, by when sent: what the ranges' counts for S's
--                own sends leave out (GuardRules.ranges(ofSubject:))
--   B ch:S|A     string: a challenge passed for subject S from address A
--                ('' = none), waiting for its send (its expiry: the
--                guard's challenge_pass_seconds)
-- KEYS: 1 B guard (the slot's key). ARGV: 1 the operation, 2 B, 3 the
-- country, 4 the address ('' = none), 5 not after (server µs, '' = none:
-- past it a change changes nothing and answers {'late'}, so a request a
-- stopped server runs late counts no code), 10 the store's time ('' =
-- read it), 11 the number's ranges, widest first, comma-separated ('' =
-- none: the guard has no range signals), then per operation:
--   (the counts, as a screen answers them: {guard or '', c_unverified_day, c_unverified_hour,
--             c_verified_day, c_verified_hour, today, {day, n, ...},
--             a_unverified_day, a_unverified_hour, a_verified_day,
--             a_countries_day, now, the send time of the oldest code
--             counted in the country's day and in its hour ('' = none)})
--   screen:   6 code id, 7 subject, 8 the guard's text as the engine
--             knows it (it chose the send's lists by it), 9 '1' to judge
--             the send by the signals, '' not to. If the store's guard
--             is another: {'stale', guard or ''}, nothing counted. Not
--             judged: {'same'}. Judged (rules.lua's R.guard_judge, by the
--             stored thresholds): the counts, then 15 '1' if the
--             code was counted ('0': enforced and warned, not counted),
--             16 the warnings' bits, 17 the country's daily and 18 hourly
--             thresholds, 19 the address's daily and 20 hourly, 21 the
--             most codes verified in one day of the history, 22 the
--             narrowest range that warned ('' = none), 23 and 24 its
--             unverified codes in a day and an hour, 25 and 26 its daily
--             and hourly thresholds, then per range of ARGV 11: its name,
--             unverified in a day, in an hour, verified in a day, in an
--             hour, the most verified in one day of the history.
--             Element 22 is '1' when a challenge pass let the send
--             through its warnings (used up), else ''; the range's part
--             starts at 23 (see above, each one later).
--   returned: 6 code id, 7 subject, 8 the key channel, 9 the notice
--             ('' = none) published: the counts have room again.
--             Answers {'ok'}.
--   verified: 7 subject (the country is the subject's), 8 and 9 as for
--             returned, published if a code was verified. Answers {'ok'}.
--   set:      6 the guard's text ('' = none), 7 its extension ('' =
--             none). Answers {'ok'}.
--   pass:     7 subject: a challenge passed (B ch:SUBJECT|ADDRESS, for the
--             guard's challenge_pass_seconds). Answers {'ok'}, or {'none'}
--             when the guard has no challenge signals.
-- The guard the screen compares (and answers when stale) is B guard's
-- text, and B guardx's extension on a line of its own when it holds.
-- A key of another type is answered {'corrupt', key, why}: every key an
-- operation touches is type-checked first; a screen's reads are the
-- checks of the keys it reads, and its first writes (codes, prev) check
-- theirs (see count_sent): no TYPE call.
local op, B, CTY, A = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if late(ARGV[5]) then return {'late'} end
local DAY, HOUR = C.DAY, C.HOUR
local function typed(key, want)
  local t = redis.call('TYPE', key).ok
  return t == want or t == 'none'
end
if op == 'set' then
  -- ARGV 6: the guard's text ('' = none), 7 its extension.
  if not typed(B .. 'guard', 'string') then return {'corrupt', B .. 'guard', 'is not a string'} end
  if not typed(B .. 'guardx', 'string') then return {'corrupt', B .. 'guardx', 'is not a string'} end
  if ARGV[6] == '' then redis.call('DEL', B .. 'guard') else redis.call('SET', B .. 'guard', ARGV[6]) end
  if ARGV[6] == '' or (ARGV[7] or '') == '' then
    redis.call('DEL', B .. 'guardx')
  else
    redis.call('SET', B .. 'guardx', ARGV[6] .. '\n' .. ARGV[7])
  end
  return {'ok'}
end
-- The guard's text (B guard) with its extension line (B guardx) when that
-- holds: what a screen compares. `get` reads a key (a screen's reads are
-- its type checks: `rd` below); a plain GET when none is given.
local function stored_guard(get)
  get = get or function(key) return redis.call('GET', key) end
  local g = get(B .. 'guard') or ''
  local x = get(B .. 'guardx')
  if g ~= '' and x and string.sub(x, 1, #g + 1) == g .. '\n' then return x end
  return g
end
-- A setting of the extension line of guard text g (Guard.extensionText).
local function extension(g, name)
  return tonumber(string.match(g, '\n.-' .. name .. '=(%d+)') or '0') or 0
end
if op == 'pass' then
  if not typed(B .. 'guard', 'string') or not typed(B .. 'guardx', 'string') then
    return {'corrupt', B .. 'guard', 'is not a string'}
  end
  local g = stored_guard()
  local seconds = extension(g, 'challenge_pass_seconds')
  if extension(g, 'challenge') == 0 or seconds < 1 then return {'none'} end
  local key = B .. 'ch:' .. ARGV[7] .. '|' .. A
  if not typed(key, 'string') then return {'corrupt', key, 'is not a string'} end
  redis.call('SET', key, '1', 'PX', fmt(math.min(seconds, 3600) * 1000))
  return {'ok'}
end
-- The number's ranges (ARGV 11).
local RANGES = {}
for r in string.gmatch(ARGV[11] or '', '[^,]+') do RANGES[#RANGES + 1] = r end
-- The store's time (ARGV 10: given by decide.lua, which read it already).
local now = tonumber(ARGV[10] or '') or store_time()
-- Every key the operation touches, type-checked first (not the screen's:
-- its reads and first writes are its checks).
if op ~= 'screen' then
  local names = {B .. 'guard', B .. 'codes', B .. 'latest', B .. 'uc:' .. CTY, B .. 'vc:' .. CTY, B .. 'd:' .. CTY,
                 B .. 'prev', B .. 'guardx'}
  local kinds = {'string', 'hash', 'hash', 'zset', 'zset', 'hash', 'hash', 'string'}
  if A ~= '' then
    for _, n in ipairs({'ua:', 'va:'}) do names[#names + 1] = B .. n .. A; kinds[#kinds + 1] = 'zset' end
    for _, n in ipairs({'ac:', 'avc:'}) do names[#names + 1] = B .. n .. A; kinds[#kinds + 1] = 'hash' end
  end
  for _, r in ipairs(RANGES) do
    for _, n in ipairs({'ur:', 'vr:'}) do names[#names + 1] = B .. n .. r; kinds[#kinds + 1] = 'zset' end
    names[#names + 1] = B .. 'dr:' .. r; kinds[#kinds + 1] = 'hash'
  end
  if #RANGES > 0 then names[#names + 1] = B .. 'us:' .. (ARGV[7] or ''); kinds[#kinds + 1] = 'zset' end
  for i, key in ipairs(names) do
    if not typed(key, kinds[i]) then return {'corrupt', key, 'is not a ' .. kinds[i]} end
  end
end
-- A read that is its key's type check: a key of another type raises
-- {corrupt = key, kind = want}, answered as corrupt (see `screen`).
local function rd(want, cmd, key, ...)
  local r = redis.pcall(cmd, key, ...)
  if type(r) == 'table' and r.err then error({corrupt = key, kind = want}) end
  return r
end
-- The windows' bounds as ZCOUNT takes them, each written once per send
-- (w: R.guard_windows'): after a window's start (exclusive), up to due.
local function bounds(w)
  return {unverified_day = '(' .. fmt(w.unverified_day), unverified_hour = '(' .. fmt(w.unverified_hour),
          verified_day = '(' .. fmt(w.verified_day), verified_hour = '(' .. fmt(w.verified_hour), due = fmt(w.due)}
end
-- Members scored after `since` (a bound of `bounds`).
local function count(key, since)
  return rd('zset', 'ZCOUNT', key, since, '+inf')
end
-- Unverified codes sent after `since` and at or before `due` (bounds).
local function unverified(key, since, due)
  return rd('zset', 'ZCOUNT', key, since, due)
end
-- A code counts as unverified from unverified_after_seconds (the 13th
-- threshold of the guard's 9th field, read by `thresholds` below; 0 when a
-- guard written before it holds 12) past its send; codes are kept a day
-- past the longest (LATE).
local LATE = C.LATE
local function after(t)
  local seconds = t.unverified_after_seconds
  if seconds * 1000000 > LATE then return 0 end
  return seconds * 1000000
end
-- Drops the members older than `span`; keeps `key` `us` (and a minute)
-- from now. A send trims and keeps several keys by the same spans: each
-- span's bound is written once.
local trims, keeps = {}, {}
local function trim(key, span)
  local before = trims[span]
  if not before then before = fmt(now - span); trims[span] = before end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', before)
end
local function keep(key, us)
  local ms = keeps[us]
  if not ms then ms = fmt(math.floor(us / 1000) + 60000); keeps[us] = ms end
  redis.call('PEXPIRE', key, ms)
end
local today = math.floor(now / DAY)

-- The counts of a send by guard g with thresholds t (13 and 14: see
-- `oldest`).
local function check(g, t)
  local w = R.guard_windows(now, after(t))
  local b = bounds(w)
  w.bounds = b
  local days = rd('hash', 'HGETALL', B .. 'd:' .. CTY)
  local reply = {g, unverified(B .. 'uc:' .. CTY, b.unverified_day, b.due),
                 unverified(B .. 'uc:' .. CTY, b.unverified_hour, b.due), count(B .. 'vc:' .. CTY, b.verified_day),
                 count(B .. 'vc:' .. CTY, b.verified_hour), today, days, 0, 0, 0, 0}
  if A ~= '' then
    reply[8] = unverified(B .. 'ua:' .. A, b.unverified_day, b.due)
    reply[9] = unverified(B .. 'ua:' .. A, b.unverified_hour, b.due)
    reply[10] = count(B .. 'va:' .. A, b.verified_day)
    local asked, n = {[CTY] = true}, 0
    local seen = rd('hash', 'HGETALL', B .. 'ac:' .. A)
    for i = 1, #seen, 2 do
      local at = tonumber(seen[i + 1])
      if at and at > now - DAY then asked[seen[i]] = true end
    end
    local verified = rd('hash', 'HGETALL', B .. 'avc:' .. A)
    for i = 1, #verified, 2 do
      local at = tonumber(verified[i + 1])
      if at and at > now - DAY then asked[verified[i]] = nil end
    end
    for _ in pairs(asked) do n = n + 1 end
    reply[11] = n
  end
  reply[12], reply[13], reply[14] = now, '', ''
  return reply, w
end
-- When the counts can first go down with no verification: the oldest code
-- counted in the country's day and in its hour (windows w) leaves it
-- (engines refuse until then; read only for a send the screen refuses).
local function oldest(w)
  local function first(since)
    local got = rd('zset', 'ZRANGEBYSCORE', B .. 'uc:' .. CTY, since, w.bounds.due, 'WITHSCORES', 'LIMIT', 0, 1)
    return got[2] and tonumber(got[2]) or ''
  end
  return first(w.bounds.unverified_day), first(w.bounds.unverified_hour)
end
-- The counts have room again (a code returned or verified): engines that
-- refuse sends of the scope without asking ask again.
local function freed()
  if ARGV[8] and ARGV[8] ~= '' and ARGV[9] ~= '' then redis.call('PUBLISH', ARGV[8], ARGV[9]) end
end

local id, subject = ARGV[6], ARGV[7]
-- Counts code `id` of `subject` unverified, sent now (among its
-- country's codes too if `in_country`). Its first writes
-- are the type checks of the two hashes the screen does not read (prev,
-- then codes): a key of another type is answered corrupt with nothing
-- written (a prev written first is taken back).
local function count_sent(in_country)
  local before = rd('hash', 'HGET', B .. 'latest', subject)
  local linked = before and before ~= id
  if linked then rd('hash', 'HSET', B .. 'prev', id, before) end
  local wrote = redis.pcall('HSET', B .. 'codes', id, CTY .. '|' .. A .. '|' .. fmt(now))
  if type(wrote) == 'table' and wrote.err then
    if linked then redis.call('HDEL', B .. 'prev', id) end
    error({corrupt = B .. 'codes', kind = 'hash'})
  end
  if linked then keep(B .. 'prev', DAY + LATE) end
  redis.call('HSET', B .. 'latest', subject, id)
  keep(B .. 'codes', DAY + LATE); keep(B .. 'latest', DAY + LATE)
  if in_country then
    redis.call('ZADD', B .. 'uc:' .. CTY, fmt(now), id); trim(B .. 'uc:' .. CTY, DAY + LATE)
    keep(B .. 'uc:' .. CTY, DAY + LATE)
  end
  for _, r in ipairs(RANGES) do
    redis.call('ZADD', B .. 'ur:' .. r, fmt(now), id); trim(B .. 'ur:' .. r, DAY + LATE)
    keep(B .. 'ur:' .. r, DAY + LATE)
  end
  if #RANGES > 0 then
    redis.call('ZADD', B .. 'us:' .. subject, fmt(now), id); trim(B .. 'us:' .. subject, DAY + LATE)
    keep(B .. 'us:' .. subject, DAY + LATE)
  end
  if A ~= '' then
    redis.call('ZADD', B .. 'ua:' .. A, fmt(now), id); trim(B .. 'ua:' .. A, DAY + LATE)
    keep(B .. 'ua:' .. A, DAY + LATE)
    redis.call('HSET', B .. 'ac:' .. A, CTY, fmt(now)); keep(B .. 'ac:' .. A, DAY)
  end
end

-- The guard's thresholds (its 9th field: GuardThresholds' 13 values in
-- their order, or 12 written before unverified_after_seconds), or nil.
local THRESHOLDS = {'country_daily_minimum', 'country_history_percent', 'country_day_percent',
  'country_hourly_minimum', 'country_hourly_divisor', 'country_hour_percent', 'address_daily_minimum',
  'address_day_percent', 'address_hourly_minimum', 'address_hourly_divisor', 'address_countries_maximum',
  'history_days', 'unverified_after_seconds'}
-- The 9th field as Guard.encoded writes it: 13 (or 12) values of digits,
-- each at most 1000000, read in one match; any other text is read value by
-- value (below), which gives the same thresholds or nil.
local PLAIN13 = '^(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+)$'
local PLAIN12 = '^(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+),(%d+)$'
local function plain_thresholds(text)
  local values = {string.match(text, PLAIN13)}
  if #values == 0 then values = {string.match(text, PLAIN12)} end
  if #values == 0 then return nil end
  local t = {unverified_after_seconds = 0}
  for i, v in ipairs(values) do
    if #v > 7 then return nil end
    local n = v + 0 -- (digits, matched)
    if n > 1000000 then return nil end
    t[THRESHOLDS[i]] = n
  end
  return t
end
local function thresholds(g)
  local text = string.match(g, '^[^;]*;[^;]*;[^;]*;[^;]*;[^;]*;[^;]*;[^;]*;[^;]*;([^;]*);')
  local t = text and plain_thresholds(text)
  if not t then
    local n = 0
    t = {unverified_after_seconds = 0}
    for v in string.gmatch(text or '', '[^,]+') do
      n = n + 1
      t[THRESHOLDS[n] or 'extra'] = int(v, 0, 1000000)
      if not t[THRESHOLDS[n] or 'extra'] then return nil end
    end
    if n ~= 12 and n ~= 13 then return nil end
  end
  if #RANGES == 0 then return t end
  -- The ranges' minimums, on the extension line (Guard.extensionText),
  -- which a guard with range signals always has; read only for a number
  -- with ranges (the judgment of one without reads none of them).
  local x = string.match(g, '\n(.*)$') or ''
  t.range_daily_minimum = int(string.match(x, 'range_daily_minimum=(%d+)') or '', 0, 1000000)
  t.range_hourly_minimum = int(string.match(x, 'range_hourly_minimum=(%d+)') or '', 0, 1000000)
  t.range_new_daily_minimum = int(string.match(x, 'range_new_daily_minimum=(%d+)') or '', 0, 1000000)
  t.range_new_hourly_minimum = int(string.match(x, 'range_new_hourly_minimum=(%d+)') or '', 0, 1000000)
  if not (t.range_daily_minimum and t.range_hourly_minimum and t.range_new_daily_minimum
          and t.range_new_hourly_minimum) then return nil end
  return t
end
-- The codes verified per day (HGETALL of a d: or dr: hash) as
-- {day = count}; a field or count that is no number is corrupt.
local function days_of(raw, key)
  local days = {}
  for j = 1, #raw, 2 do
    local day, n = tonumber(raw[j]), tonumber(raw[j + 1])
    if not (day and n) then error({corrupt = key, why = 'holds a day count that is not a number'}) end
    days[day] = n
  end
  return days
end
local function screen()
  local g = stored_guard(function(key) return rd('string', 'GET', key) end)
  if g ~= ARGV[8] then return {'stale', g} end
  if ARGV[9] ~= '1' then return {'same'} end
  local t = thresholds(g)
  if not t then return {'corrupt', B .. 'guard', 'holds bad guard thresholds'} end
  local reply, w = check(g, t)
  local days = days_of(reply[7], B .. 'd:' .. CTY)
  local c = {country_unverified_day = reply[2], country_unverified_hour = reply[3],
             country_verified_day = reply[4], country_verified_hour = reply[5],
             country_verified_daily_maximum = R.verified_daily_maximum(days, today, t.history_days),
             has_address = A ~= '', address_unverified_day = reply[8], address_unverified_hour = reply[9],
             address_verified_day = reply[10], address_countries_day = reply[11], ranges = {}}
  local per_range = {}
  -- The subject's own codes that its ranges count now: left out.
  local own_day, own_hour = 0, 0
  if #RANGES > 0 then
    local own = rd('zset', 'ZRANGEBYSCORE', B .. 'us:' .. subject, w.bounds.unverified_day, w.bounds.due, 'WITHSCORES')
    for i = 2, #own, 2 do
      own_day = own_day + 1
      if tonumber(own[i]) > w.unverified_hour then own_hour = own_hour + 1 end
    end
  end
  for _, r in ipairs(RANGES) do
    local history = days_of(rd('hash', 'HGETALL', B .. 'dr:' .. r), B .. 'dr:' .. r)
    local b = w.bounds
    local rc = {range = r, unverified_day = math.max(0, unverified(B .. 'ur:' .. r, b.unverified_day, b.due) - own_day),
                unverified_hour = math.max(0, unverified(B .. 'ur:' .. r, b.unverified_hour, b.due) - own_hour),
                verified_day = count(B .. 'vr:' .. r, b.verified_day), verified_hour = count(B .. 'vr:' .. r, b.verified_hour),
                verified_daily_maximum = R.verified_daily_maximum(history, today, t.history_days)}
    c.ranges[#c.ranges + 1] = rc
    for _, v in ipairs({rc.range, rc.unverified_day, rc.unverified_hour, rc.verified_day, rc.verified_hour,
                        rc.verified_daily_maximum}) do per_range[#per_range + 1] = v end
  end
  local j = R.guard_judge(t, c)
  -- Enforced (mode 2) and warned: refused or challenged, and not counted,
  -- unless a challenge passed for the subject and address lets it through
  -- (used up).
  local mode, challenge = tonumber(string.match(g, '^[^;]*;(%d+);')), extension(g, 'challenge')
  local answer, passed = R.guard_answer(mode, j, challenge, false), ''
  if answer == 'challenge' then
    local key = B .. 'ch:' .. subject .. '|' .. A
    if rd('string', 'GET', key) then
      redis.call('DEL', key)
      answer, passed = 'grant', '1'
    end
  end
  local counted = answer == 'grant'
  if counted then
    count_sent(R.counts_in_country(j, passed == '1'))
  else
    reply[13], reply[14] = oldest(w)
  end
  reply[15], reply[16], reply[17], reply[18] = counted and '1' or '0', j.warnings, j.country_daily, j.country_hourly
  reply[19], reply[20], reply[21] = j.address_daily, j.address_hourly, c.country_verified_daily_maximum
  reply[22] = passed
  reply[23], reply[24], reply[25], reply[26], reply[27] = j.range, j.range_unverified_day, j.range_unverified_hour,
                                                         j.range_daily, j.range_hourly
  for _, v in ipairs(per_range) do reply[#reply + 1] = v end
  return reply
end
if op == 'screen' then
  local ok, out = pcall(screen)
  if ok then return out end
  if type(out) == 'table' and out.corrupt then return {'corrupt', out.corrupt, out.why or ('is not a ' .. out.kind)} end
  return error(out)
end

if op == 'returned' then
  redis.call('ZREM', B .. 'uc:' .. CTY, id)
  for _, r in ipairs(RANGES) do redis.call('ZREM', B .. 'ur:' .. r, id) end
  if #RANGES > 0 then redis.call('ZREM', B .. 'us:' .. subject, id) end
  if A ~= '' then
    redis.call('ZREM', B .. 'ua:' .. A, id)
    -- C stays a country A asked for only by another of A's codes to C
    -- of the day (its newest); with more than 100 of them, it stays (the
    -- safe side).
    local others = redis.call('ZRANGEBYSCORE', B .. 'ua:' .. A, '(' .. fmt(now - DAY), '+inf',
                              'WITHSCORES', 'LIMIT', 0, 101)
    if #others <= 200 then
      local last
      for i = 1, #others, 2 do
        local held = redis.call('HGET', B .. 'codes', others[i])
        if held and string.match(held, '^([^|]*)|') == CTY then last = others[i + 1] end
      end
      if last then redis.call('HSET', B .. 'ac:' .. A, CTY, last) else redis.call('HDEL', B .. 'ac:' .. A, CTY) end
    end
  end
  redis.call('HDEL', B .. 'codes', id)
  if redis.call('HGET', B .. 'latest', subject) == id then
    -- The subject's code before it is its last again (the one the user
    -- holds), if it is still held unverified (a verified one is not).
    local before = redis.call('HGET', B .. 'prev', id)
    if before and redis.call('HGET', B .. 'codes', before) then
      redis.call('HSET', B .. 'latest', subject, before)
    else
      redis.call('HDEL', B .. 'latest', subject)
    end
  end
  redis.call('HDEL', B .. 'prev', id)
  freed()
  return {'ok'}
end

if op == 'verified' then
  -- Read first, check every key, then write (a script's writes stay).
  local code = redis.call('HGET', B .. 'latest', subject)
  local held = code and redis.call('HGET', B .. 'codes', code)
  local country, address
  if held then country, address = string.match(held, '^([^|]*)|([^|]*)|%d+$') end
  address = address or ''
  if address ~= '' then
    if not typed(B .. 'va:' .. address, 'zset') then return {'corrupt', B .. 'va:' .. address, 'is not a zset'} end
    if not typed(B .. 'avc:' .. address, 'hash') then return {'corrupt', B .. 'avc:' .. address, 'is not a hash'} end
    if not typed(B .. 'ua:' .. address, 'zset') then return {'corrupt', B .. 'ua:' .. address, 'is not a zset'} end
  end
  if country and country ~= CTY and not typed(B .. 'uc:' .. country, 'zset') then
    return {'corrupt', B .. 'uc:' .. country, 'is not a zset'}
  end
  if code then
    if country then redis.call('ZREM', B .. 'uc:' .. country, code) end
    for _, r in ipairs(RANGES) do redis.call('ZREM', B .. 'ur:' .. r, code) end
    if #RANGES > 0 then redis.call('ZREM', B .. 'us:' .. subject, code) end
    if address ~= '' then redis.call('ZREM', B .. 'ua:' .. address, code) end
    redis.call('HDEL', B .. 'codes', code)
    redis.call('HDEL', B .. 'latest', subject)
  end
  -- Only a code sent (and not verified yet) counts: a verification with
  -- no code would raise the thresholds for nothing.
  if not held then return {'ok'} end
  freed()
  local member = fmt(now) .. '|' .. subject
  -- The ranges count the verification if the guard has range signals.
  if not string.find(stored_guard(), '\nranges=1', 1, true) then RANGES = {} end
  redis.call('ZADD', B .. 'vc:' .. CTY, fmt(now), member); trim(B .. 'vc:' .. CTY, DAY); keep(B .. 'vc:' .. CTY, DAY)
  redis.call('HINCRBY', B .. 'd:' .. CTY, fmt(today), 1)
  redis.call('HDEL', B .. 'd:' .. CTY, fmt(today - 61))
  keep(B .. 'd:' .. CTY, 61 * DAY)
  for _, r in ipairs(RANGES) do
    redis.call('ZADD', B .. 'vr:' .. r, fmt(now), member); trim(B .. 'vr:' .. r, DAY); keep(B .. 'vr:' .. r, DAY)
    redis.call('HINCRBY', B .. 'dr:' .. r, fmt(today), 1)
    redis.call('HDEL', B .. 'dr:' .. r, fmt(today - 61))
    keep(B .. 'dr:' .. r, 61 * DAY)
  end
  if address ~= '' then
    redis.call('ZADD', B .. 'va:' .. address, fmt(now), member); trim(B .. 'va:' .. address, DAY)
    keep(B .. 'va:' .. address, DAY)
    redis.call('HSET', B .. 'avc:' .. address, CTY, fmt(now)); keep(B .. 'avc:' .. address, DAY)
  end
  return {'ok'}
end
return {'corrupt', B, 'unknown guard operation ' .. op}
