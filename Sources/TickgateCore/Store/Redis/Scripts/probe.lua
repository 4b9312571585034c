-- Run once at open: calls, on KEYS[1] (the prefix's probe key, which holds
-- nothing after), each command the other scripts call, so that an ACL user
-- without the right to one fails at open with Redis's NOPERM naming it,
-- not at its first decision. ARGV: 1 channel, 2 notice (this engine's
-- wake notice: every other engine skips it). Answers 'ok'.
local K = KEYS[1]
redis.call('TIME')
redis.call('TYPE', K)
redis.call('HSET', K, 'p', '1')
redis.call('HGET', K, 'p')
redis.call('HGETALL', K)
redis.call('PEXPIRE', K, '60000')
redis.call('PTTL', K)
redis.call('HDEL', K, 'p')
redis.call('ZADD', K, '1', 'p')
redis.call('ZSCORE', K, 'p')
redis.call('ZREVRANGE', K, '0', '0', 'WITHSCORES')
redis.call('ZREM', K, 'p')
redis.call('SET', K, '1', 'PX', '60000')
redis.call('DEL', K)
redis.call('PUBLISH', ARGV[1], ARGV[2])
return 'ok'
