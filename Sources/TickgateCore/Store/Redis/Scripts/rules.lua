-- The decision's rules, for every Redis script: the same pure functions as
-- Sources/TickgateCore/Rules/*.swift (memory and SQLite), one for one, in
-- snake case, and no rule anywhere else in Lua. Tests/rules/*.json holds
-- the cases both must answer alike. Times and spans in µs; -1 or nil for
-- none; C holds the constants of Rules/RuleConstants.swift.
local R = {}
-- The consecutive count after a send granted at now (SendRules.consecutive):
-- quiet (0: never) or more after the last send restarts the schedule.
function R.consecutive(n, last, quiet, now)
  if last >= 0 and quiet > 0 and now - last >= quiet then n = 0 end
  if n < 0 then n = 0 end
  return math.min(n, C.MAX_CONSECUTIVE - 1) + 1
end
-- The cooldown after the n-th consecutive send; the last step repeats.
function R.cooldown(cooldowns, n)
  return cooldowns[math.min(math.max(n, 1), #cooldowns)]
end
-- The countdown after a granted send: deadline and phase (1 cooling, 2
-- locked until the window frees a send at `frees`, if later).
function R.countdown_after_send(step, retry, frees, now)
  local untl = now + math.max(step, retry)
  if frees and frees > untl then return frees, 2 end
  return untl, 1
end
-- How many of the sends (oldest first) the window no longer counts.
function R.expired_sends(sends, wmax, window, now)
  if wmax == 0 then return #sends end
  local horizon = now - window
  for j, v in ipairs(sends) do
    if v > horizon then return j - 1 end
  end
  return #sends
end
-- The sends the window still counts, as a new list.
function R.prune(sends, wmax, window, now)
  local keep = {}
  for j = R.expired_sends(sends, wmax, window, now) + 1, #sends do keep[#keep + 1] = sends[j] end
  return keep
end
-- When the window frees a send if it is full at now, else nil.
function R.window_frees(sends, wmax, window, now)
  if wmax == 0 or #sends < wmax then return nil end
  local free = sends[#sends - wmax + 1] + window
  if free > now then return free end
  return nil
end
-- One more wrong code: the count and whether the code is dead now.
function R.wrong_code(w, max)
  if w < 0 then w = 0 end
  w = math.min(w, C.MAX_WRONG_CODES) + 1
  return w, max > 0 and w >= max
end
-- Wrong codes the code survives after w (nil: no cap).
function R.wrong_codes_left(w, max)
  if max > 0 then return math.max(max - w, 0) end
  return nil
end
-- How long the key lives (SendRules.keyLife): its countdown, the quiet
-- reset of its last send (a year with none, a day at least), the window
-- of its newest send; never before now; -1: nothing to keep.
function R.key_life(deadline, last, newest, quiet, window, now)
  local life = deadline
  if last >= 0 then
    local q = quiet > 0 and quiet or C.YEAR
    if q < C.DAY then q = C.DAY end
    life = math.max(life, last + q)
  end
  if newest >= 0 then life = math.max(life, newest + window) end
  if life < 0 then return -1 end
  return math.max(life, now)
end
-- When a budget key has room again if it has none (BudgetRules.frees):
-- back(cap) is the charge cap back from the newest (nil: fewer).
function R.budget_frees(windows, back, now)
  local latest
  for _, w in ipairs(windows) do
    local at = back(w.cap)
    if at then
      local free = at + w.len
      if free > now and (not latest or free > latest) then latest = free end
    end
  end
  return latest
end
-- The pumping guard (GuardRules.swift). pct: percent % of a count, down.
local function pct(count, percent) return math.floor(count * percent / 100) end
-- The windows a guarded send at now counts in (GuardRules.windows): codes
-- sent in (unverified_day or unverified_hour, due] and not verified, due
-- being `after` before now; verifications after verified_day or _hour.
function R.guard_windows(now, after)
  local due = now - after
  return {due = due, unverified_day = due - C.DAY, unverified_hour = due - C.HOUR,
          verified_day = now - C.DAY, verified_hour = now - C.HOUR}
end
-- The most codes verified in one day of the last `history` days (today
-- included): days maps a day number to its count.
function R.verified_daily_maximum(days, today, history)
  local most = 0
  for day, n in pairs(days) do
    if day > today - history and day <= today and n > most then most = n end
  end
  return most
end
-- What a guard of mode `mode` answers a send judged j: 'grant' (counted),
-- 'refuse', or 'challenge' when every warning is one of the bits of
-- `challenge` (a pass `passed`: 'grant') (GuardRules.answer).
function R.guard_answer(mode, j, challenge, passed)
  if not R.guard_refuses(mode, j) then return 'grant' end
  local w, c = j.warnings, challenge
  for _ = 1, 7 do
    if w % 2 == 1 and c % 2 == 0 then return 'refuse' end
    w, c = math.floor(w / 2), math.floor(c / 2)
  end
  if passed then return 'grant' end
  return 'challenge'
end
-- A range's daily and hourly thresholds: the country's formulas (its
-- percents and divisor of t) over the range's own counts r, with the
-- range's minimums, or a new range's (no code of it verified in the
-- history) (GuardRules.rangeThresholds).
function R.range_thresholds(t, r)
  local known = r.verified_daily_maximum > 0 or r.verified_day > 0
  local daily = math.max(known and t.range_daily_minimum or t.range_new_daily_minimum,
                         pct(r.verified_daily_maximum, t.country_history_percent),
                         pct(r.verified_day, t.country_day_percent))
  local hourly = math.max(known and t.range_hourly_minimum or t.range_new_hourly_minimum,
                          math.floor(daily / math.max(t.country_hourly_divisor, 1)),
                          pct(r.verified_hour, t.country_hour_percent))
  return daily, hourly
end
-- True if a guard of mode `mode` (0 off, 1 record only, 2 enforce) refuses
-- a send judged j: enforced and warned (GuardRules.refuses).
-- Whether a granted code counts among its country's unverified codes: not
-- when a passed challenge let it through warnings of its ranges alone
-- (0x20, 0x40; GuardRules.countsInCountry says why).
function R.counts_in_country(j, passed)
  local w = j.warnings
  return not (passed and w > 0 and w % 32 == 0 and w < 128)
end
function R.guard_refuses(mode, j)
  return mode == 2 and j.warnings > 0
end
-- The judgment of a send by the counts c (itself not counted) and the
-- thresholds t (GuardThresholds' fields in snake case): the warnings (the
-- bits of TG_WARNING_*) and the thresholds it was judged by.
function R.guard_judge(t, c)
  local j = {warnings = 0, country_daily = 0, country_hourly = 0, address_daily = 0, address_hourly = 0}
  j.country_daily = math.max(t.country_daily_minimum, pct(c.country_verified_daily_maximum, t.country_history_percent),
                             pct(c.country_verified_day, t.country_day_percent))
  j.country_hourly = math.max(t.country_hourly_minimum, math.floor(j.country_daily / math.max(t.country_hourly_divisor, 1)),
                              pct(c.country_verified_hour, t.country_hour_percent))
  if c.country_unverified_day + 1 > j.country_daily then j.warnings = j.warnings + 1 end
  if c.country_unverified_hour + 1 > j.country_hourly then j.warnings = j.warnings + 2 end
  if c.has_address then
    j.address_daily = math.max(t.address_daily_minimum, pct(c.address_verified_day, t.address_day_percent))
    j.address_hourly = math.max(t.address_hourly_minimum,
                                math.floor(pct(c.address_verified_day, t.address_day_percent) / math.max(t.address_hourly_divisor, 1)))
    if c.address_unverified_day + 1 > j.address_daily then j.warnings = j.warnings + 4 end
    if c.address_unverified_hour + 1 > j.address_hourly then j.warnings = j.warnings + 8 end
    if c.address_countries_day > t.address_countries_maximum then j.warnings = j.warnings + 16 end
  end
  -- The number's ranges, widest first (GuardRules.ranges): each by the
  -- country's formulas over its own history; the narrowest that warns is
  -- named (j.range, '' when none).
  j.range, j.range_unverified_day, j.range_unverified_hour, j.range_daily, j.range_hourly = '', 0, 0, 0, 0
  local daily_bit, hourly_bit = false, false
  for _, r in ipairs(c.ranges or {}) do
    local daily, hourly = R.range_thresholds(t, r)
    local d, h = r.unverified_day + 1 > daily, r.unverified_hour + 1 > hourly
    if d or h then
      daily_bit, hourly_bit = daily_bit or d, hourly_bit or h
      j.range, j.range_unverified_day, j.range_unverified_hour = r.range, r.unverified_day, r.unverified_hour
      j.range_daily, j.range_hourly = daily, hourly
    end
  end
  if daily_bit then j.warnings = j.warnings + 32 end
  if hourly_bit then j.warnings = j.warnings + 64 end
  return j
end
