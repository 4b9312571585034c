-- Drops every charge of a budget key (KEYS 1; on a Redis Cluster KEYS 2,
-- its reservations, too). ARGV: 1 not after (server µs), 2 the keys'
-- channel, 3 the budgets' notice (engines that know a budget spent hear
-- that it may have room).
-- Answers {'ok'}, or {'late'} (past the deadline: nothing changed).
if late(ARGV[1]) then return {'late'} end
for j = 1, NK do redis.call('DEL', KEYS[j]) end
if ARGV[2] ~= '' then redis.call('PUBLISH', ARGV[2], ARGV[3]) end
return {'ok'}
