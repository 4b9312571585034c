-- Run once at open: calls, on KEYS[1] (the prefix's probe key, which holds
-- nothing after), each command the other scripts call, so that an ACL user
-- without the right to one fails at open, naming it, not at its first
-- decision. ARGV: 1 channel, 2 notice (this engine's wake notice: every
-- other engine skips it). Answers 'ok', or {'denied', command, error}.
local K = KEYS[1]
local calls = {
  {'TIME'}, {'TYPE', K}, {'HSET', K, 'p', '1'}, {'HINCRBY', K, 'p', '1'}, {'HGET', K, 'p'}, {'HMGET', K, 'p'}, {'HGETALL', K},
  {'PEXPIRE', K, '60000'}, {'PTTL', K}, {'HDEL', K, 'p'}, {'ZADD', K, '1', 'p'}, {'ZCOUNT', K, '0', '1'}, {'ZSCORE', K, 'p'},
  {'ZRANGE', K, '0', '0'}, {'ZREVRANGE', K, '0', '0', 'WITHSCORES'}, {'ZRANGEBYSCORE', K, '0', '1'},
  {'ZREMRANGEBYSCORE', K, '0', '0'}, {'ZREM', K, 'p'}, {'GET', K}, {'SET', K, '1', 'PX', '60000'},
  {'DEL', K}, {'XADD', K, 'MAXLEN', '~', '1', '*', 'p', '1'}, {'DEL', K}, {'PUBLISH', ARGV[1], ARGV[2]},
}
for _, c in ipairs(calls) do
  local r = redis.pcall(unpack(c))
  if type(r) == 'table' and r.err then
    redis.pcall('DEL', K)
    return {'denied', string.lower(c[1]), r.err}
  end
end
return 'ok'
