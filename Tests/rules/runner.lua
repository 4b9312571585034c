-- Runs every case of rules.json (ARGV[1]) through rules.lua, which the test
-- puts before this file (with the constants C, as generate.py splices them
-- into the store's scripts). Answers the outputs as JSON, group by group and
-- case by case, each number as a decimal string (JSON's numbers are
-- doubles). Tests/python/test_rule_vectors.py compares them.
local doc = cjson.decode(ARGV[1])
local null = cjson.null
-- A time or count that may be none: -1 for the rules.
local function opt(v) if v == null or v == nil then return -1 end return v end
local function num(v) if v == nil or v == -1 then return null end return string.format('%d', v) end
local function list(t) local o = {} for j, v in ipairs(t) do o[j] = string.format('%d', v) end return o end
local run = {
  consecutive = function(i) return {n = num(R.consecutive(i.n, opt(i.last), i.quiet, i.now))} end,
  cooldown = function(i) return {step = num(R.cooldown(i.cooldowns, i.n))} end,
  countdown_after_send = function(i)
    local frees = i.frees ~= null and i.frees or nil
    local d, p = R.countdown_after_send(i.step, i.retry, frees, i.now)
    return {deadline = num(d), phase = p == 2 and 'locked' or 'cooling'}
  end,
  prune = function(i) return {sends = list(R.prune(i.sends, i.wmax, i.window, i.now))} end,
  window_frees = function(i) return {frees = num(R.window_frees(i.sends, i.wmax, i.window, i.now))} end,
  wrong_code = function(i) local w, dead = R.wrong_code(i.w, i.max) return {w = num(w), dead = dead} end,
  wrong_codes_left = function(i) return {left = num(R.wrong_codes_left(i.w, i.max))} end,
  key_life = function(i)
    return {life = num(R.key_life(opt(i.deadline), opt(i.last), opt(i.newest), i.quiet, i.window, i.now))}
  end,
  guard_judge = function(i)
    local t = {}
    for k, v in pairs(doc.guard_defaults) do t[k] = v end
    for k, v in pairs(i.t) do t[k] = v end
    local j = R.guard_judge(t, i.c)
    local names, bits = {}, {'unverified_by_country_daily', 'unverified_by_country_hourly',
      'unverified_by_address_daily', 'unverified_by_address_hourly', 'countries_by_address_daily',
      'unverified_by_range_daily', 'unverified_by_range_hourly'}
    for b, name in ipairs(bits) do
      if math.floor(j.warnings / 2 ^ (b - 1)) % 2 == 1 then names[#names + 1] = name end
    end
    local out = {warnings = names, country_daily = num(j.country_daily), country_hourly = num(j.country_hourly),
                 address_daily = num(j.address_daily), address_hourly = num(j.address_hourly)}
    if i.c.ranges then
      out.range, out.range_unverified_day, out.range_unverified_hour = j.range, num(j.range_unverified_day),
        num(j.range_unverified_hour)
      out.range_daily, out.range_hourly = num(j.range_daily), num(j.range_hourly)
    end
    return out
  end,
  guard_windows = function(i)
    local w = R.guard_windows(i.now, i.after)
    return {due = num(w.due), unverified_day = num(w.unverified_day), unverified_hour = num(w.unverified_hour),
            verified_day = num(w.verified_day), verified_hour = num(w.verified_hour)}
  end,
  guard_refuses = function(i) return {refuses = R.guard_refuses(i.mode, {warnings = i.warnings})} end,
  counts_in_country = function(i) return {counts = R.counts_in_country({warnings = i.warnings}, i.passed)} end,
  guard_answer = function(i)
    return {answer = R.guard_answer(i.mode, {warnings = i.warnings}, i.challenge, i.passed)}
  end,
  verified_daily_maximum = function(i)
    local days = {}
    for _, pair in ipairs(i.days) do days[pair[1]] = pair[2] end
    return {most = num(R.verified_daily_maximum(days, i.today, i.history))}
  end,
  budget_frees = function(i)
    local ws = {}
    for j, w in ipairs(i.windows) do ws[j] = {cap = w.cap, len = w.len} end
    local charges = i.charges
    local back = function(cap) return charges[#charges - cap + 1] end
    return {frees = num(R.budget_frees(ws, back, i.now))}
  end,
}
local answers = {}
for name, cases in pairs(doc.groups) do
  local fn = run[name]
  if not fn then return redis.error_reply('no runner for the rule ' .. name) end
  local got = {}
  for j, case in ipairs(cases) do got[j] = fn(case['in']) end
  answers[name] = got
end
return cjson.encode(answers)
