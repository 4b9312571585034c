-- Drops every charge of a budget key (KEYS 1; on a Redis Cluster KEYS 2,
-- its reservations, too). ARGV: 1 not after (server µs).
-- Answers {'ok'}, or {'late'} (past the deadline: nothing changed).
if late(ARGV[1]) then return {'late'} end
for j = 1, NK do redis.call('DEL', KEYS[j]) end
return {'ok'}
