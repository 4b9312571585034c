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
-- codes the sweep reports (0: no sweep). After the event, the sweep: codes
-- sent at or before R.guard_windows' due are never verified.
-- Answers {'ok', then per code decided: id, outcome, subject, country,
-- address, its age (µs, an integer)}, or {'corrupt', key, why}.
local op, B, subject, id = ARGV[1], ARGV[2], ARGV[4], ARGV[5]
if late(ARGV[3]) then return {'late'} end
local after = int(ARGV[6], 0, C.LATE)
local most = int(ARGV[7], 0, 1000)
if not after or not most then return {'corrupt', B .. 'guard', 'was asked outcomes with bad arguments'} end
local names = {B .. 'due', B .. 'dsub', B .. 'dlast', B .. 'codes', B .. 'latest'}
local kinds = {'zset', 'hash', 'hash', 'hash', 'hash'}
for i, key in ipairs(names) do
  local t = redis.call('TYPE', key).ok
  if t ~= kinds[i] and t ~= 'none' then return {'corrupt', key, 'is not a ' .. kinds[i]} end
end
local now = store_time()
local reply = {'ok'}
-- Takes code `code` off; answers it as `outcome` (nothing if not followed).
local function take(code, outcome)
  if redis.call('ZREM', B .. 'due', code) == 0 then return end
  local held = redis.call('HGET', B .. 'dsub', code) or ''
  redis.call('HDEL', B .. 'dsub', code)
  local s, country, address, sent = string.match(held, '^([^|]*)|([^|]*)|([^|]*)|(%d+)$')
  if s and redis.call('HGET', B .. 'dlast', s) == code then redis.call('HDEL', B .. 'dlast', s) end
  local age = sent and math.max(0, now - tonumber(sent)) or 0
  for _, v in ipairs({code, outcome, s or '', country or '', address or '', age}) do reply[#reply + 1] = v end
end
if op ~= 'sweep' then
  local followed = redis.call('HGET', B .. 'dlast', subject)
  if followed and followed ~= id then
    -- Verified or killed, but the number's last code is another (sent
    -- while no one listened): the followed one was replaced.
    local latest = redis.call('HGET', B .. 'latest', subject)
    local outcome = op == 'sent' and 'replaced' or op
    if op ~= 'sent' and latest and latest ~= followed then outcome = 'replaced' end
    take(followed, outcome)
  end
end
if op == 'sent' then
  local held = redis.call('HGET', B .. 'codes', id)
  local country, address, sent = string.match(held or '', '^([^|]*)|([^|]*)|(%d+)$')
  -- (Only a counted code is followed.)
  if sent and redis.call('ZSCORE', B .. 'due', id) == false then
    redis.call('ZADD', B .. 'due', sent, id)
    redis.call('HSET', B .. 'dsub', id, subject .. '|' .. country .. '|' .. address .. '|' .. sent)
    redis.call('HSET', B .. 'dlast', subject, id)
  end
end
if most > 0 then
  local w = R.guard_windows(now, after)
  local due = redis.call('ZRANGEBYSCORE', B .. 'due', '-inf', fmt(w.due), 'LIMIT', 0, most)
  for _, code in ipairs(due) do take(code, 'never_verified') end
end
-- Kept a day past the longest unverified_after (as guard.lua's codes).
for _, key in ipairs({B .. 'due', B .. 'dsub', B .. 'dlast'}) do
  redis.call('PEXPIRE', key, fmt(math.floor((C.DAY + C.LATE) / 1000) + 60000))
end
return reply
