-- Drops every charge of a budget key. ARGV: 1 not after (server µs).
-- Answers {'ok'}, or {'late'} (past the deadline: nothing changed).
if late(ARGV[1]) then return {'late'} end
redis.call('DEL', KEYS[1])
return {'ok'}
