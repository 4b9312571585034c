-- Sets one field of the settings hash (a policy, titles, a budget), or
-- deletes it (value ''), and tells every engine (notice). ARGV: 1 field,
-- 2 value, 3 channel, 4 notice, 5 not after (server µs: past it nothing
-- changes and the answer is {'late'}).
if late(ARGV[5]) then return {'late'} end
if not hash_or_none(KEYS[1]) then return {'corrupt', KEYS[1], 'is not a hash'} end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
if ARGV[3] ~= '' then redis.call('PUBLISH', ARGV[3], ARGV[4]) end
return {'ok'}
