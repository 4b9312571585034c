-- A guarded scope's codes followed for their outcome
-- (Pumping/CodeOutcomes.swift keeps the same in memory), in the scope's
-- slot, named from the base B = "P u{SCOPE}" (ARGV 2):
--   B due     sorted set: followed code ids, by when sent (store µs)
--   B dsub    hash: code id -> "SUBJECT|COUNTRY|ADDRESS"
--   B dlast   hash: subject -> its followed code id
-- and guard.lua's B codes (a counted code's "COUNTRY|ADDRESS|SENT_US") and
-- B latest (subject -> its last code id). A code is taken off in the step
-- that decides its outcome: one call, on one engine, reports it.
-- KEYS: 1 B guard (the slot's key). ARGV: 1 the event: 'sent' (ARGV 5's
-- send succeeded: followed from now, the subject's followed code before
-- it replaced), 'verified', 'killed' (the subject's followed code), or
-- 'sweep' (nothing but the sweep); 2 B, 3 not after (server µs, '' =
-- none: past it, {'late'} and nothing changes), 4 the subject, 5 the code
-- id ('' unless 'sent'), 6 the guard's unverified_after (µs), 7 the most
-- codes the sweep reports (0: no sweep), 8 the most entries of the
-- guard's record stream "B records" ('' or absent: none), 9... the
-- outcome records' fields (see records below). After the event, the
-- sweep: codes sent at or before R.guard_windows' due are never verified.
-- Answers {'ok', then per code decided: id, outcome, subject, country,
-- address, its age (µs, an integer)}, or {'corrupt', key, why} having
-- changed nothing: a key of another type is found by the call that reads
-- it (no TYPE call: the keys are this file's own), and every key is read
-- before the step's first write to it.
-- decide.lua runs it (as outcomes_run) in the step that ends a followed
-- code's successful send, so that following costs no round trip.
local op, B, subject, id = ARGV[1], ARGV[2], ARGV[4], ARGV[5]
if late(ARGV[3]) then return {'late'} end
local after = int(ARGV[6], 0, C.LATE)
local most = int(ARGV[7], 0, 1000)
if not after or not most then return {'corrupt', B .. 'guard', 'was asked outcomes with bad arguments'} end
local due, dsub, dlast = B .. 'due', B .. 'dsub', B .. 'dlast'
-- A call on one of the keys; one of another type stops the step.
local WRITES = {ZREM = true, ZADD = true, HSET = true, HDEL = true}
local wrote = {}
local function call(kind, cmd, key, ...)
  local r = redis.pcall(cmd, key, ...)
  if type(r) == 'table' and r.err then error({corrupt = key, kind = kind}) end
  if WRITES[cmd] then wrote[key] = true end
  return r
end
-- The decided codes' records, appended to the stream as guard_record.lua
-- appends the engine's, when the guard keeps one (best effort, as every
-- record). The engine formats them (GuardRecord's stream fields, ARGV
-- 9...: field, value, ...); a value it cannot know refers to the code's
-- answer: "\1N" is its N-th value (1 id, 2 outcome, 3 subject, 4 country,
-- 5 address, 6 age), "\3W" when it was sent, W (the wall clock's µs at
-- the call) less its age, in ms.
local function records(reply)
  local most = int(ARGV[8] or '', 1, 10000000)
  if not most then return end
  for j = 2, #reply, 6 do
    append_record(B .. 'records', most, ARGV, 9, function(mark, ref)
      if mark == 1 then return reply[j - 1 + tonumber(ref)] end
      return math.floor((tonumber(ref) - reply[j + 5]) / 1000)
    end)
  end
end
local function step()
  local now = store_time()
  local reply = {'ok'}
  -- Takes code `code` off; answers it as `outcome` (nothing if not
  -- followed). (Reads first: see above.)
  local function take(code, outcome)
    local held = call('hash', 'HGET', dsub, code) or ''
    local s, country, address, sent = string.match(held, '^([^|]*)|([^|]*)|([^|]*)|(%d+)$')
    local last = s and call('hash', 'HGET', dlast, s)
    if call('zset', 'ZREM', due, code) == 0 then return end
    call('hash', 'HDEL', dsub, code)
    if last == code then call('hash', 'HDEL', dlast, s) end
    local age = sent and math.max(0, now - tonumber(sent)) or 0
    for _, v in ipairs({code, outcome, s or '', country or '', address or '', age}) do reply[#reply + 1] = v end
  end
  -- (A sent code's own counts: read before anything is written.)
  local held = op == 'sent' and call('hash', 'HGET', B .. 'codes', id)
  if op ~= 'sweep' then
    local followed = call('hash', 'HGET', dlast, subject)
    if followed and followed ~= id then
      -- Verified or killed, but the number's last code is another (sent
      -- while no one listened): the followed one was replaced.
      local latest = call('hash', 'HGET', B .. 'latest', subject)
      local outcome = op == 'sent' and 'replaced' or op
      if op ~= 'sent' and latest and latest ~= followed then outcome = 'replaced' end
      take(followed, outcome)
    end
  end
  if op == 'sent' then
    local country, address, sent = string.match(held or '', '^([^|]*)|([^|]*)|(%d+)$')
    -- (Only a counted code is followed. dsub, perhaps not read yet, is
    -- written first.)
    if sent and call('zset', 'ZSCORE', due, id) == false then
      call('hash', 'HSET', dsub, id, subject .. '|' .. country .. '|' .. address .. '|' .. sent)
      call('hash', 'HSET', dlast, subject, id)
      call('zset', 'ZADD', due, sent, id)
    end
  end
  if most > 0 then
    local w = R.guard_windows(now, after)
    local gone = call('zset', 'ZRANGEBYSCORE', due, '-inf', fmt(w.due), 'LIMIT', 0, most)
    for _, code in ipairs(gone) do take(code, 'never_verified') end
  end
  -- (An error in a record, past the step's writes, stops no step.)
  pcall(records, reply)
  -- Kept a day past the longest unverified_after (as guard.lua's codes):
  -- the keys this step wrote (one it only read may not be ours).
  for key, _ in pairs(wrote) do
    redis.call('PEXPIRE', key, fmt(math.floor((C.DAY + C.LATE) / 1000) + 60000))
  end
  return reply
end
local ok, out = pcall(step)
if ok then return out end
if type(out) == 'table' and out.corrupt then return {'corrupt', out.corrupt, 'is not a ' .. out.kind} end
return error(out)
