/// The Lua scripts of the Redis store. Each store call is one script run
/// (`EVALSHA`, loaded again on `NOSCRIPT`), so each decision is atomic on
/// the server and takes one round trip.
///
/// `decide` makes the decisions of `KeyDecision` with the same rules, on
/// the server's time; the store then makes the same decision in Swift on
/// the state the script read and checks that both agree (a disagreement is
/// a bug, reported as `TG_E_STORE_CORRUPT`).
///
/// Times are whole microseconds of the server's clock (`TIME`), or of the
/// engine's clock for `TG_STORE_CLOCK_ENGINE`; spans are microseconds too.
/// A key's hash holds its countdown and send record, all eleven fields
/// (-1: absent):
///
///     d deadline   p phase (0 sending, 1 cooling, 2 locked)
///     l duration   i tick interval   c when a ticket's send was charged
///     h has sent (0/1)   n consecutive sends   s last send
///     w wrong codes   x code dead (0/1)   t sends in the window ("t1,t2")
///
/// A budget key is a sorted set of charges scored by their time. Every key
/// written gets an expiry: the end of what it still decides plus a slack.
enum RedisScripts {
    /// Shared helpers: integer checks and formatting.
    private static let prelude = """
        local MAXT = 9007199254740991
        local function fmt(x) return string.format('%.0f', x) end
        local function int(v, lo, hi)
          if type(v) ~= 'string' or #v > 17 or not string.match(v, '^%-?%d+$') then return nil end
          local n = tonumber(v)
          if n < lo or n > hi then return nil end
          return n
        end
        local function clock(a)
          local t = redis.call('TIME')
          local real = tonumber(t[1]) * 1000000 + tonumber(t[2])
          if a == '' then return real, real end
          return tonumber(a), real
        end
        local function expire(key, life_us, now, slack_ms)
          local ms = math.ceil((life_us - now) / 1000) + slack_ms
          if ms < 1 then ms = 1 end
          redis.call('PEXPIRE', key, fmt(ms))
        end
        """

    /// ARGV: 1 op (start cancel begin end verified failed read), 2 now
    /// ('' = TIME), 3 not after (server µs, '' = none), 4 slack ms, 5
    /// channel ('' = none), 6 message, 7 tick, 8 policy
    /// ("c1,c2|max|window|quiet|ticket|wrong"), 9-11 the op's own (start:
    /// duration, restart; end: outcome, retry, ticket deadlines), 12...
    /// one window list ("cap:length,...") per budget key (KEYS[2]...).
    ///
    /// Returns {code, now, real, hash, backs} (hash: the key's fields as
    /// HGETALL read them before the decision; backs: per budget key the
    /// charge each window's cap back from the newest, -1 for none), code
    /// 'ok' or 'refused'; {'late', now, real}: the call came after its deadline
    /// and changed nothing; {'corrupt', key, why}.
    static let decide = prelude + "\n" + """
        local K = KEYS[1]
        local op = ARGV[1]
        local now, real = clock(ARGV[2])
        if ARGV[3] ~= '' and real > tonumber(ARGV[3]) then return {'late', now, real} end
        local slack = tonumber(ARGV[4])
        local raw = redis.pcall('HGETALL', K)
        if raw.err then return {'corrupt', K, raw.err} end
        local h = {}
        for j = 1, #raw, 2 do h[raw[j]] = raw[j + 1] end
        local DAY = 86400000000
        local YEAR = 365 * DAY
        local function bad(f) return {'corrupt', K, 'field ' .. f .. ' holds "' .. string.sub(tostring(h[f]), 1, 40) .. '"'} end
        -- A key's hash holds all eleven fields (-1: absent), or none.
        local n_fields = 0
        for f, _ in pairs(h) do
          n_fields = n_fields + 1
          if #f ~= 1 or not string.find('dplichnswxt', f, 1, true) then
            return {'corrupt', K, 'unknown field "' .. string.sub(f, 1, 40) .. '"'}
          end
        end
        if n_fields ~= 0 and n_fields ~= 11 then return {'corrupt', K, 'holds ' .. n_fields .. ' of its 11 fields'} end
        local cd = nil
        local rec = nil
        if n_fields == 11 then
          -- The countdown, if it has time left.
          local d, p, l, i, c = int(h.d, -1, MAXT), int(h.p, -1, 2), int(h.l, -1, YEAR), int(h.i, -1, DAY), int(h.c, -1, MAXT)
          if not d then return bad('d') end
          if not p then return bad('p') end
          if not l then return bad('l') end
          if not i then return bad('i') end
          if not c then return bad('c') end
          if d >= 0 then
            if p < 0 then return bad('p') end
            if l < 1 then return bad('l') end
            if i < 10000 then return bad('i') end
            if d > now then cd = {d = d, p = p, l = l, i = i, c = c} end
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
        -- The state before the decision goes back as the hash was read
        -- (the engine checks it as it checks a query's HGETALL).
        local function reply(code, backs)
          return {code, now, real, raw, backs or {}}
        end
        if op == 'read' then return reply('ok') end

        -- The policy.
        local tick = tonumber(ARGV[7])
        local pol = nil
        if ARGV[8] ~= '' then
          local steps, wmax, window, quiet, ticket, wrong = string.match(ARGV[8], '^([%d,]+)|(%d+)|(%d+)|(%d+)|(%d+)|(%d+)$')
          local cooldowns = {}
          for part in string.gmatch(steps, '%d+') do cooldowns[#cooldowns + 1] = tonumber(part) end
          pol = {cooldowns = cooldowns, wmax = tonumber(wmax), window = tonumber(window),
                 quiet = tonumber(quiet), ticket = tonumber(ticket), wrong = tonumber(wrong)}
        end
        local function prune(r)
          if pol.wmax == 0 then r.sends = {} return end
          local horizon = now - pol.window
          local keep = {}
          for _, v in ipairs(r.sends) do if v > horizon then keep[#keep + 1] = v end end
          r.sends = keep
        end
        local function frees(r)
          local cap = pol.wmax
          if cap == 0 or #r.sends < cap then return nil end
          local free = r.sends[#r.sends - cap + 1] + pol.window
          if free > now then return free end
          return nil
        end
        -- The budget keys.
        local budgets = {}
        for j = 2, #KEYS do
          local b = {key = KEYS[j], windows = {}, horizon = 0}
          for cap, len in string.gmatch(ARGV[10 + j], '(%d+):(%d+)') do
            b.windows[#b.windows + 1] = {cap = tonumber(cap), len = tonumber(len)}
            if tonumber(len) > b.horizon then b.horizon = tonumber(len) end
          end
          budgets[#budgets + 1] = b
        end

        local changed_cd, changed_rec = false, false
        local backs = nil
        if op == 'start' then
          if ARGV[10] ~= '1' and cd then return reply('refused') end
          local dur = tonumber(ARGV[9])
          cd = {d = now + dur, p = 1, l = dur, i = tick, c = -1}
          changed_cd = true
        elseif op == 'cancel' then
          if not cd then return reply('refused') end
          cd = nil
          changed_cd = true
        elseif op == 'begin' then
          if cd then return reply('refused') end
          if rec then
            local r = {sends = rec.sends}
            prune(r)
            if frees(r) then return reply('refused') end
          end
          backs = {}
          local full = false
          for j, b in ipairs(budgets) do
            local gone = redis.pcall('ZREMRANGEBYSCORE', b.key, '-inf', fmt(now - b.horizon))
            if type(gone) == 'table' and gone.err then return {'corrupt', b.key, gone.err} end
            local these = {}
            for _, w in ipairs(b.windows) do
              local got = redis.pcall('ZREVRANGE', b.key, w.cap - 1, w.cap - 1, 'WITHSCORES')
              if got.err then return {'corrupt', b.key, got.err} end
              local at = -1
              if #got == 2 then
                at = tonumber(got[2])
                if not at or at ~= math.floor(at) or at < 0 or at > MAXT then
                  return {'corrupt', b.key, 'a charge has the score ' .. tostring(got[2])}
                end
                if at > now then at = now end
                if at + w.len > now then full = true end
              end
              these[#these + 1] = at
            end
            backs[j] = these
          end
          if full then return reply('refused', backs) end
          for _, b in ipairs(budgets) do
            local member = fmt(now)
            local k = 0
            while redis.call('ZSCORE', b.key, member) do
              k = k + 1
              member = fmt(now) .. '-' .. k
            end
            redis.call('ZADD', b.key, fmt(now), member)
            expire(b.key, now + b.horizon, now, slack)
          end
          cd = {d = now + pol.ticket, p = 0, l = pol.ticket, i = tick, c = now}
          changed_cd = true
        elseif op == 'end' then
          local match = false
          local first = nil
          for part in string.gmatch(ARGV[11], '%-?%d+') do
            local v = tonumber(part)
            first = first or v
            if cd and cd.p == 0 and cd.d == v then match = true end
          end
          if not match then return reply('refused') end
          if ARGV[9] ~= 'ok' then
            if cd.c >= 0 then
              for _, b in ipairs(budgets) do
                local got = redis.pcall('ZRANGEBYSCORE', b.key, fmt(cd.c), fmt(cd.c), 'LIMIT', 0, 1)
                if got.err then return {'corrupt', b.key, got.err} end
                if #got == 1 then redis.call('ZREM', b.key, got[1]) end
              end
            end
            cd = nil
            changed_cd = true
          else
            local r = rec or {h = 0, n = 0, w = 0, x = 0, s = -1, sends = {}}
            if r.s >= 0 and pol.quiet > 0 and now - r.s >= pol.quiet then r.n = 0 end
            prune(r)
            r.n = math.min(r.n, 2147483646) + 1
            r.s = now
            r.h = 1
            r.w = 0
            r.x = 0
            if pol.wmax > 0 then r.sends[#r.sends + 1] = now end
            local step = pol.cooldowns[math.min(math.max(r.n, 1), #pol.cooldowns)]
            local retry = tonumber(ARGV[10])
            if retry > step then step = retry end
            local untl = now + step
            local phase = 1
            local free = frees(r)
            if free and free > untl then
              untl = free
              phase = 2
            end
            rec = r
            cd = {d = untl, p = phase, l = untl - now, i = tick, c = -1}
            changed_cd, changed_rec = true, true
          end
        elseif op == 'verified' then
          if rec and rec.x == 1 then return reply('refused') end
          if cd and cd.p == 1 then
            cd = nil
            changed_cd = true
          end
          if rec then
            prune(rec)
            rec.n = 0
            rec.h = 0
            rec.s = -1
            rec.w = 0
            if #rec.sends == 0 then rec = nil end
          end
          changed_rec = true
        elseif op == 'failed' then
          if not rec or rec.h == 0 then return reply('refused') end
          if rec.x == 1 then return reply('refused') end
          rec.w = math.min(rec.w, 1000) + 1
          if pol.wrong > 0 and rec.w >= pol.wrong then rec.x = 1 end
          changed_rec = true
        else
          return {'corrupt', K, 'unknown decision ' .. op}
        end

        if changed_cd or changed_rec then
          if cd or rec then
            local t = {}
            if rec then for j, v in ipairs(rec.sends) do t[j] = fmt(v) end end
            redis.call('HSET', K,
              'd', cd and fmt(cd.d) or '-1', 'p', cd and cd.p or '-1', 'l', cd and fmt(cd.l) or '-1',
              'i', cd and fmt(cd.i) or '-1', 'c', cd and fmt(cd.c) or '-1',
              'h', rec and rec.h or '-1', 'n', rec and fmt(rec.n) or '-1', 'w', rec and rec.w or '-1',
              'x', rec and rec.x or '-1', 's', rec and fmt(rec.s) or '-1', 't', table.concat(t, ','))
          end
        end
        -- The key lives while its countdown runs and while its record
        -- still decides something: the quiet reset of the last send (a
        -- year with none) and the window of its newest send.
        local life = -1
        if cd then life = cd.d end
        if rec then
          if rec.s >= 0 then
            local quiet = (pol and pol.quiet > 0) and pol.quiet or YEAR
            if quiet < DAY then quiet = DAY end
            life = math.max(life, rec.s + quiet)
          end
          if #rec.sends > 0 and pol then life = math.max(life, rec.sends[#rec.sends] + pol.window) end
          if life < now then life = now end
        end
        if life < 0 then
          redis.call('DEL', K)
        else
          expire(K, life, now, slack)
        end
        if ARGV[5] ~= '' then redis.call('PUBLISH', ARGV[5], ARGV[6]) end
        return reply('ok', backs)
        """

    /// Ends the countdown of each key given if it runs (a scope-wide
    /// cancel, one batch of keys). ARGV: 1 now, 2 channel, 3.. messages
    /// (one per key). Returns how many it ended.
    static let cancelKeys = prelude + "\n" + """
        local now = clock(ARGV[1])
        local ended = 0
        for j, K in ipairs(KEYS) do
          local t = redis.pcall('TYPE', K)
          if t.ok == 'hash' then
            local d = int(redis.call('HGET', K, 'd'), 0, MAXT)
            if d and d > now then
              if redis.call('HGET', K, 'h') == '-1' then
                redis.call('DEL', K)
              else
                redis.call('HSET', K, 'd', '-1', 'p', '-1', 'l', '-1', 'i', '-1', 'c', '-1')
              end
              ended = ended + 1
              if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[2 + j]) end
            end
          end
        end
        return ended
        """

    /// Sets one field of a hash of settings (policies, titles, budgets,
    /// sessions) and the hash's expiry, or deletes the field (value '').
    /// ARGV: 1 field, 2 value, 3 expiry ms, 4 channel, 5 message.
    static let put = """
        local t = redis.pcall('TYPE', KEYS[1])
        if t.ok ~= 'hash' and t.ok ~= 'none' then return {'corrupt', KEYS[1], 'holds a ' .. tostring(t.ok)} end
        if ARGV[2] == '' then
          redis.call('HDEL', KEYS[1], ARGV[1])
        else
          redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
        end
        if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
        if ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], ARGV[5]) end
        return {'ok'}
        """
}
