-- One decision on one key (KeyDecision's rules, on the server's clock):
-- reads the key, its scope's policy and its budgets from the store, decides,
-- writes, publishes a notice and answers. The engine applies the answer.
--
-- KEYS: 1 the key's hash, 2 the settings hash, 3... the budget keys'
-- sorted sets; on a Redis Cluster only the key's hash (the settings and
-- the budgets are in other slots: ARGV 8 is then the scope's policy as the
-- settings hold it, and ARGV 16 the budgets' verdict, reached by the
-- engine's reservations, Scripts/reserve.lua: '' every budget has room,
-- 'budget|FREES|INDEX' one is full, 'nobudget|INDEX' one is not set). Beside its twelve fields the key's hash keeps each engine's
-- last answer on it, for a retry: field 'q' .. engine =
-- "id|real|keep|now|a|before~after" (kept until the server's clock passes
-- real + keep µs; now '' when it is real; only 'ok' answers are kept: a
-- refusal changed nothing).
-- ARGV: 1 op (start cancel begin end verified failed), 2 now ('' = TIME),
-- 3 not after (server µs: past it the decision is refused as late), 4 slack
-- ms, 5 channel, 6 notice, 7 tick µs, 8 the default policy, 9 the scope,
-- 10-12 the op's own (start: duration, restart; begin: -, -, ticket; end:
-- outcome, retry, ticket), 13 the decision's id, 14 the engine's name,
-- 15 how long an answer is kept (µs), 16... the budgets' names (one per
-- budget key).
--
-- Answers {code, now, real, before, after, why, a, b}: code 'ok' or
-- 'refused'; before and after the key's twelve fields in the order of
-- FIELDS (d p l i c k h n w x s t) joined by '|' ('' for none; after only
-- for 'ok'); why
-- the refusal ('busy', 'window' a = frees at, 'budget' a = frees at b =
-- index, 'nobudget' b = index, 'none', 'expired', 'ticket', 'dead',
-- 'unsent'; for 'ok' a = the cap of wrong codes).
-- {'late', now, real}: past its deadline, nothing changed.
-- {'guarded', now, real}: a send the scope's guard did not see (ARGV 10
-- not 's' or 'g') on a scope that has one: nothing changed.
-- A guarded send on one server (ARGV 10 'g'; KEYS: ..., the guard's key
-- "B guard", the clock's; ARGV 14 + the last budget's index ...: see the
-- screen below) is screened by guard.lua's operations in the same step:
-- its answer is the 9th element of 'ok' and 'refused' (a key's refusal
-- gives the guard's count back), or {'guard', now, real, before, '', '',
-- -1, -1, its answer} when the guard does not pass it (nothing changed).
-- A guarded send granted in the step appends its decision record to the
-- scope's stream "B records" when the guard keeps one (ARGV 14 + NB + 8
-- its most entries, '' none; then the record's fields: see record_granted).
-- A successful end whose code the engine follows for its outcome (ARGV 10
-- 'follow'; KEYS: ..., "B guard", the clock's; ARGV 14 + NB ... the
-- guard's base, the subject, the code's id, the guard's unverified_after
-- (µs), the most codes the sweep reports, then outcomes.lua's ARGV 8...)
-- runs outcomes.lua's 'sent' in the same step: its answer is the 9th
-- element of 'ok'.
-- {'corrupt', key, why}. A repeated id answers the first answer again and
-- changes nothing (with no 9th element).
local K, S = KEYS[1], nil
if NK >= 2 then S = KEYS[2] end
-- A guarded send screened in this step (ARGV 10 'g', one server): the
-- guard's key is the last before the clock's, and the budgets' keys end
-- before it (NB).
local screening = ARGV[1] == 'begin' and ARGV[10] == 'g'
local following = ARGV[1] == 'end' and ARGV[10] == 'follow'
local NB = (screening or following) and NK - 1 or NK
local FIELDS = {'d', 'p', 'l', 'i', 'c', 'k', 'h', 'n', 'w', 'x', 's', 't'}
local op = ARGV[1]
local mine, mine_id = 'q' .. ARGV[14], ARGV[13] .. '|'
-- Keys of another type are refused by the calls themselves (pcall): no
-- TYPE call of its own on the way of every decision.
local all = redis.pcall('HGETALL', K)
if all.err then return {'corrupt', K, 'is not a hash'} end
local now, real = clock(ARGV[2])
-- A notice "ENGINE ..." as "ENGINE@REAL ...": when it was sent, for its
-- lag (RedisWatcher; an older engine reads it as another engine's name).
local function stamped(notice) return (string.gsub(notice, ' ', '@' .. fmt(real) .. ' ', 1)) end
-- The key's fields, and the answers kept.
-- stale: other engines' answers past their time (nil: none).
-- others: fresh answers of other engines, kept until `kept_until` (server µs).
-- n_fields: how many fields the hash holds beside the answers.
-- (h is made at the size of the twelve fields when the hash has them:
-- filled one at a time, it would grow four times.)
local h = #all < 24 and {} or
  {d = nil, p = nil, l = nil, i = nil, c = nil, k = nil, h = nil, n = nil, w = nil, x = nil, s = nil, t = nil}
local stale, others, kept_until, n_fields = nil, 0, 0, 0
for j = 1, #all, 2 do
  local f, v = all[j], all[j + 1]
  if #f > 1 and string.byte(f) == 113 then -- 'q'
    if f == mine then
      -- This engine's answer is read only when its id is this decision's
      -- (a plain find first: no pattern on the way of every decision).
      if find(v, mine_id, 1, true) == 1 then
        local id, at = string.match(v, '^([^|]*)|(%d+)|(%d+)|')
        if id == ARGV[13] then
          local t, a, b4, af = string.match(v, '^[^|]*|%d+|%d+|(%d*)|(%-?%d+)|([^~]*)~(.*)$')
          if not t then return {'corrupt', K, 'field ' .. mine .. ' is not an answer'} end
          local r = tonumber(at)
          return {'ok', t == '' and r or tonumber(t), r, b4, af, '', tonumber(a), -1}
        end
      end
    else
      local id, at, kept = string.match(v, '^([^|]*)|(%d+)|(%d+)|')
      local untl = id and #at <= 17 and #kept <= 17 and tonumber(at) + tonumber(kept)
      if not untl or untl < real then
        stale = stale or {}
        stale[#stale + 1] = f
      else
        others = others + 1
        if untl > kept_until then kept_until = untl end
      end
    end
  else
    h[f] = v
    n_fields = n_fields + 1
  end
end
if ARGV[3] ~= '' and real > tonumber(ARGV[3]) then return {'late', now, real} end
local slack = tonumber(ARGV[4])
local function bad(f) return {'corrupt', K, 'field ' .. f .. ' holds "' .. string.sub(tostring(h[f]), 1, 40) .. '"'} end
-- A key's hash holds all twelve fields (-1 or '': absent), or none; a hash
-- of format 1 has the first eleven (no ticket).
-- Every field is one of the twelve when as many of the twelve are there
-- as fields; only otherwise is the unknown one looked for.
if n_fields > 0 then
  local known = 0
  for j = 1, 12 do
    if h[FIELDS[j]] then known = known + 1 end
  end
  if known ~= n_fields then
    local KNOWN = {d = 1, p = 1, l = 1, i = 1, c = 1, k = 1, h = 1, n = 1, w = 1, x = 1, s = 1, t = 1}
    for f, _ in pairs(h) do
      if not KNOWN[f] then
        return {'corrupt', K, 'unknown field "' .. string.sub(f, 1, 40) .. '"'}
      end
    end
  end
end
-- (A hash of format 1 gets its ticket field at its first write.)
local upgrade = n_fields == 11 and h.k == nil
if upgrade then h.k = '' n_fields = 12 end
if n_fields ~= 0 and n_fields ~= 12 then return {'corrupt', K, 'holds ' .. n_fields .. ' of its 12 fields'} end
local cd, rec = nil, nil
if n_fields == 12 then
  local d, p, l, i, c = int(h.d, -1, MAXT), int(h.p, -1, 2), int(h.l, -1, C.YEAR), int(h.i, -1, C.DAY), int(h.c, -1, MAXT)
  if not d then return bad('d') end
  if not p then return bad('p') end
  if not l then return bad('l') end
  if not i then return bad('i') end
  if not c then return bad('c') end
  if #h.k > 64 or find(h.k, '[|~]') then return bad('k') end
  if d >= 0 then
    if p < 0 then return bad('p') end
    if l < 1 then return bad('l') end
    if i < 10000 then return bad('i') end
    if d > now then cd = {d = d, p = p, l = l, i = i, c = c, k = h.k} end
  end
  local hs, n, w, x, s = int(h.h, -1, 1), int(h.n, -1, 2147483647), int(h.w, -1, 1001), int(h.x, -1, 1), int(h.s, -1, MAXT)
  if not hs then return bad('h') end
  if not n then return bad('n') end
  if not w then return bad('w') end
  if not x then return bad('x') end
  if not s then return bad('s') end
  if hs >= 0 then
    if n < 0 then return bad('n') end
    if w < 0 then return bad('w') end
    if x < 0 then return bad('x') end
    local sends = {}
    if h.t ~= '' then
      if #h.t > 18000000 then return bad('t') end
      local last = -1
      for part in string.gmatch(h.t, '[^,]+') do
        local v = int(part, 0, MAXT)
        if not v or v < last then return bad('t') end
        sends[#sends + 1] = v
        last = v
      end
      local _, commas = string.gsub(h.t, ',', ',')
      if commas + 1 ~= #sends then return bad('t') end
    end
    rec = {h = hs, n = n, w = w, x = x, s = s, sends = sends}
  end
end
local before = ''
if n_fields == 12 then
  before = table.concat({h.d, h.p, h.l, h.i, h.c, h.k, h.h, h.n, h.w, h.x, h.s, h.t}, '|')
end
-- The guard's screen of a guarded send (guard.lua's answer), and its
-- count given back when the key refuses the send or a key is corrupt: a
-- refusal changes nothing.
local G
local function undone(reply)
  if G and G[1] ~= 'same' and G[15] == '1' then
    local g = 14 + NB
    guard_run({'returned', ARGV[g], ARGV[g + 1], ARGV[g + 2], '', ARGV[g + 3], ARGV[g + 4], '', '', fmt(real),
               ARGV[g + 7] or ''})
  end
  if G then reply[9] = G end
  return reply
end
local function refused(why, a, b)
  return undone({'refused', now, real, before, '', why, a or -1, b or -1})
end
-- The decision record of a guarded send granted in this step, appended
-- to the scope's record stream "B records" (ARGV g + 8 its most entries;
-- '' or 0: no stream; g + 9...: the record as the engine formats it,
-- GuardRecord's stream fields, before the screen judges it). A value it
-- cannot know refers to the screen's answer G: "\1N" is G[N], "\1N?M"
-- the same but left out, field and all, when G[M] is '' or 0, and
-- "\2N=NAME,..." the names of G[N]'s bits, lowest first.
local function record_granted(g)
  local most = int(ARGV[g + 8] or '', 1, 10000000)
  if not most then return end
  append_record(ARGV[g] .. 'records', most, ARGV, g + 9, function(mark, ref)
    if mark == 1 then
      local n, m = string.match(ref, '^(%d+)%??(%d*)$')
      local gate = m ~= '' and G[tonumber(m)]
      if gate == nil or gate == '' or gate == 0 or gate == '0' then return nil end
      return G[tonumber(n)]
    end
    local n, names = string.match(ref, '^(%d+)=(.*)$')
    local bits, out, bit = tonumber(G[tonumber(n)]) or 0, {}, 1
    for name in string.gmatch(names, '[^,]+') do
      if bits % (2 * bit) >= bit then out[#out + 1] = name end
      bit = bit * 2
    end
    return table.concat(out, ',')
  end)
end

-- The scope's policy and the budgets, as the store holds them (the default
-- policy if none is set), in one read: a bare countdown (start, cancel) on
-- a key with no send record needs no policy; with a record, the policy
-- says how long the key must live.
local pol
local needs_pol = rec or (op ~= 'start' and op ~= 'cancel')
local texts = {}
if S and (needs_pol or NB >= 3) then
  local fields = {'p:' .. ARGV[9]}
  for j = 3, NB do fields[j - 1] = 'g:' .. ARGV[13 + j] end
  -- A send the scope's guard did not see (ARGV 10 not 's'): the scope
  -- must have none (Scripts/guard.lua), else the engine sends it there.
  local unscreened = op == 'begin' and ARGV[10] ~= 's' and ARGV[10] ~= 'g'
  if unscreened then fields[#fields + 1] = 'u:' .. ARGV[9] end
  local got = redis.pcall('HMGET', S, unpack(fields))
  if got.err then return {'corrupt', S, 'is not a hash'} end
  if unscreened then
    local g = table.remove(got)
    if g and g ~= '' then return {'guarded', now, real} end
  end
  texts = got
end
if needs_pol and texts[1] then
  pol = policy(texts[1])
  if not pol then return {'corrupt', S, 'field "p:' .. string.sub(ARGV[9], 1, 40) .. '" is not a policy'} end
end
if not pol and needs_pol then
  pol = policy(ARGV[8])
  if not pol then return {'corrupt', S or K, 'the default policy is malformed'} end
end
local wrong = pol and pol.wrong or -1
local tick = tonumber(ARGV[7])
-- The window's rules (rules.lua) on a record's sends.
local function prune(r) r.sends = R.prune(r.sends, pol.wmax, pol.window, now) end
local function frees(r) return R.window_frees(r.sends, pol.wmax, pol.window, now) end
-- The budgets, as the store holds them.
local budgets = {}
for j = 3, NB do
  local name = ARGV[13 + j]
  local text = texts[j - 1]
  if not text then return refused('nobudget', -1, j - 3) end
  local b = budget(text)
  if not b then return {'corrupt', S, 'field "g:' .. string.sub(name, 1, 40) .. '" is not a budget'} end
  b.key = KEYS[j]
  budgets[#budgets + 1] = b
end
-- On a cluster: the verdict of the reservations on the budgets' slots.
local verdict, v_free, v_index = nil, nil, nil
if not S and ARGV[16] and ARGV[16] ~= '' then
  verdict, v_free, v_index = string.match(ARGV[16], '^(%a+)|(%-?%d+)|(%d+)$')
  if verdict == 'nobudget' then return refused('nobudget', -1, tonumber(v_index)) end
  if verdict ~= 'budget' then return {'corrupt', K, 'a budgets verdict the engine cannot send'} end
end

-- A guarded send on one server: the guard screens it first, in this
-- step (guard.lua's screen: ARGV 14 + NB ... the guard's base, the
-- country, the address, the code's id, the subject, the guard's text as
-- the engine knows it, '1' to judge, the number's ranges). Another guard, a corrupt or late
-- screen, or a send the signals refuse uncounted: answered 'guard' (see
-- above), nothing changed.
if screening then
  local g = 14 + NB
  G = guard_run({'screen', ARGV[g], ARGV[g + 1], ARGV[g + 2], ARGV[3], ARGV[g + 3], ARGV[g + 4], ARGV[g + 5],
                 ARGV[g + 6], fmt(real), ARGV[g + 7] or ''})
  if G[1] == 'stale' or G[1] == 'corrupt' or G[1] == 'late' or (G[1] ~= 'same' and G[15] == '0') then
    return {'guard', now, real, before, '', '', -1, -1, G}
  end
end
local ticket = ''
if op == 'start' then
  if ARGV[11] ~= '1' and cd then return refused('busy') end
  local dur = tonumber(ARGV[10])
  cd = {d = now + dur, p = 1, l = dur, i = tick, c = -1, k = ''}
elseif op == 'cancel' then
  if not cd then return refused('none') end
  cd = nil
elseif op == 'begin' then
  if #ARGV[12] > 64 or find(ARGV[12], '[|~]') then return undone({'corrupt', K, 'a ticket name the key cannot hold'}) end
  if cd then return refused('busy') end
  if rec then
    local r = {sends = rec.sends}
    prune(r)
    local free = frees(r)
    if free then return refused('window', free) end
  end
  -- Every budget key has room, or nothing is charged: the refusal names
  -- the one that frees last.
  local latest, index = nil, -1
  for j, b in ipairs(budgets) do
    local backs = {}
    local gone = redis.pcall('ZREMRANGEBYSCORE', b.key, '-inf', fmt(now - b.horizon))
    if type(gone) == 'table' and gone.err then return undone({'corrupt', b.key, 'is not a sorted set'}) end
    -- The newest charge is a time not after now, or the key is not ours.
    local top = redis.call('ZREVRANGE', b.key, 0, 0, 'WITHSCORES')
    if #top == 2 and (not int(top[2], 0, MAXT) or int(top[2], 0, MAXT) > now) then
      return undone({'corrupt', b.key, 'a charge has the score ' .. string.sub(tostring(top[2]), 1, 40)})
    end
    for _, w in ipairs(b.windows) do
      local got = redis.call('ZREVRANGE', b.key, w.cap - 1, w.cap - 1, 'WITHSCORES')
      if #got == 2 then
        local at = int(got[2], 0, MAXT)
        if not at or at > now then
          return undone({'corrupt', b.key, 'a charge has the score ' .. string.sub(tostring(got[2]), 1, 40)})
        end
        backs[w.cap] = at
      end
    end
    local free = R.budget_frees(b.windows, function(cap) return backs[cap] end, now)
    if free and (not latest or free > latest) then latest, index = free, j - 1 end
  end
  if verdict == 'budget' then return refused('budget', tonumber(v_free), tonumber(v_index)) end
  if latest then return refused('budget', latest, index) end
  -- A charge's member is its time and its ticket's name (this engine's
  -- and its number): no two charges share one.
  local at = fmt(now)
  local member = #budgets > 0 and at .. '-' .. ARGV[12]
  for _, b in ipairs(budgets) do
    redis.call('ZADD', b.key, at, member)
    expire(b.key, now + b.horizon, now, slack)
  end
  cd = {d = now + pol.ticket, p = 0, l = pol.ticket, i = tick, c = now, k = ARGV[12]}
elseif op == 'end' then
  if not cd or cd.p ~= 0 or cd.k ~= ARGV[12] or ARGV[12] == '' then
    -- The ticket's run ended: by its timeout, or cancelled or replaced.
    if h.k == ARGV[12] and int(h.d, -1, MAXT) and int(h.d, -1, MAXT) >= 0 then return refused('expired') end
    return refused('ticket')
  end
  if ARGV[10] ~= 'ok' and ARGV[10] ~= 'follow' then
    -- A failed send: its charges go back (and engines that know a
    -- budget spent hear that it may have room: ENGINE b).
    if cd.c >= 0 then
      local freed = false
      for _, b in ipairs(budgets) do
        -- Its own charge by name; one of its moment (a charge named the
        -- older way) if none.
        local gone = redis.pcall('ZREM', b.key, fmt(cd.c) .. '-' .. cd.k)
        if type(gone) == 'table' and gone.err then return {'corrupt', b.key, 'is not a sorted set'} end
        if gone == 0 then
          local got = redis.call('ZRANGEBYSCORE', b.key, fmt(cd.c), fmt(cd.c), 'LIMIT', 0, 1)
          if #got == 1 then gone = redis.call('ZREM', b.key, got[1]) end
        end
        if gone > 0 then freed = true end
      end
      if freed and ARGV[5] ~= '' then redis.call('PUBLISH', ARGV[5], ARGV[14] .. '@' .. fmt(real) .. ' b') end
    end
    cd = nil
  else
    local r = rec or {h = 0, n = 0, w = 0, x = 0, s = -1, sends = {}}
    r.n = R.consecutive(r.n, r.s, pol.quiet, now)
    prune(r)
    r.s = now
    r.h = 1
    r.w = 0
    r.x = 0
    if pol.wmax > 0 then r.sends[#r.sends + 1] = now end
    local untl, phase = R.countdown_after_send(R.cooldown(pol.cooldowns, r.n), tonumber(ARGV[11]), frees(r), now)
    rec = r
    cd = {d = untl, p = phase, l = untl - now, i = tick, c = -1, k = ''}
  end
elseif op == 'verified' then
  if rec and rec.x == 1 then return refused('dead') end
  if cd and cd.p == 1 then cd = nil end
  if rec then
    prune(rec)
    rec.n = 0
    rec.h = 0
    rec.s = -1
    rec.w = 0
    if #rec.sends == 0 then rec = nil end
  end
elseif op == 'failed' then
  if not rec or rec.h == 0 then return refused('unsent') end
  if rec.x == 1 then return refused('dead') end
  local dead
  rec.w, dead = R.wrong_code(rec.w, pol.wrong)
  if dead then rec.x = 1 end
else
  return {'corrupt', K, 'unknown decision ' .. string.sub(op, 1, 40)}
end

-- The key lives while its countdown runs and while its record still
-- decides something: the quiet reset of the last send (a year with none)
-- and the window of its newest send.
local life = -1
if cd or rec then
  life = R.key_life(cd and cd.d or -1, rec and rec.s or -1, rec and rec.sends[#rec.sends] or -1,
                    pol and pol.quiet or 0, pol and pol.window or 0, now)
end
-- This engine's answer stays beside the key's fields for a retry (kept
-- `keep` µs of the server's clock); answers past theirs are dropped.
local keep = tonumber(ARGV[15])
local answer = ARGV[13] .. '|' .. fmt(real) .. '|' .. ARGV[15] .. '|' .. ARGV[2] .. '|' .. wrong .. '|' .. before ..
  '~'
-- A decision that changed nothing (a verify of a key with no record)
-- writes nothing and tells no one: its repeat answers the same.
if life < 0 and n_fields == 0 then return {'ok', now, real, '', '', '', wrong, -1} end
if life < 0 then
  -- Nothing left to decide: the hash keeps the answers only, briefly (a
  -- hash with none of the twelve fields is a key with nothing).
  if others == 0 then
    redis.call('DEL', K)
  else
    if stale then redis.call('HDEL', K, unpack(stale)) end
    if n_fields > 0 then redis.call('HDEL', K, unpack(FIELDS)) end
  end
  redis.call('HSET', K, mine, answer)
  -- (Never before another engine's answer kept here may be asked for.)
  redis.call('PEXPIRE', K, fmt(math.ceil(math.max(keep, kept_until - real) / 1000)))
  if ARGV[5] ~= '' then redis.call('PUBLISH', ARGV[5], stamped(ARGV[6])) end
  return {'ok', now, real, before, '', '', wrong, -1}
end
local t = ''
if rec and #rec.sends > 0 then
  local parts = {}
  for j, x in ipairs(rec.sends) do parts[j] = fmt(x) end
  t = table.concat(parts, ',')
end
local v = {cd and fmt(cd.d) or '-1', cd and fmt(cd.p) or '-1', cd and fmt(cd.l) or '-1',
           cd and fmt(cd.i) or '-1', cd and fmt(cd.c) or '-1', cd and cd.k or '',
           rec and fmt(rec.h) or '-1', rec and fmt(rec.n) or '-1', rec and fmt(rec.w) or '-1',
           rec and fmt(rec.x) or '-1', rec and fmt(rec.s) or '-1', t}
local after = table.concat(v, '|')
-- Only the fields that changed are written (each costs the server).
-- (set is made at its largest size, ns the part used.)
local set = {mine, answer .. after, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil,
             nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
local ns = 2
for j = 1, 12 do
  local f = FIELDS[j]
  if h[f] ~= v[j] or (upgrade and j == 6) then
    set[ns + 1] = f
    set[ns + 2] = v[j]
    ns = ns + 2
  end
end
if stale then redis.call('HDEL', K, unpack(stale)) end
redis.call('HSET', K, unpack(set, 1, ns))
expire(K, math.max(life, now + keep, now + kept_until - real), now, slack)
if ARGV[5] ~= '' then redis.call('PUBLISH', ARGV[5], stamped(ARGV[6])) end
if screening then
  -- (Best effort, as every record: the send is granted whatever happens
  -- to its record.)
  pcall(record_granted, 14 + NB)
elseif following then
  -- (The end is written: whatever happens in the follow, best effort,
  -- the answer is 'ok'.)
  local g = 14 + NB
  local ok, O = pcall(outcomes_run, {'sent', ARGV[g], '', ARGV[g + 1], ARGV[g + 2], ARGV[g + 3], ARGV[g + 4],
                                     unpack(ARGV, g + 5)})
  if not ok then O = {'corrupt', ARGV[g] .. 'guard', 'failed to follow the code'} end
  return {'ok', now, real, before, after, '', wrong, -1, O}
end
return {'ok', now, real, before, after, '', wrong, -1, G}
