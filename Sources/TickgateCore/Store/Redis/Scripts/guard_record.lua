-- Appends a guarded send's decision record to the scope's capped stream
-- "P u{SCOPE}records" (XADD with MAXLEN ~), which any process may read
-- (XRANGE, XREAD). KEYS: 1 the stream. ARGV: 1 the most entries kept
-- (about: Redis trims whole nodes), then field, value, ... Answers {'ok'},
-- or {'corrupt', key, why} if the key is not a stream.
local t = redis.call('TYPE', KEYS[1]).ok
if t ~= 'stream' and t ~= 'none' then return {'corrupt', KEYS[1], 'is not a stream'} end
local most = int(ARGV[1], 1, 10000000)
if not most then return {'corrupt', KEYS[1], 'bad length ' .. string.sub(ARGV[1], 1, 20)} end
redis.call('XADD', KEYS[1], 'MAXLEN', '~', fmt(most), '*', unpack(ARGV, 2))
return {'ok'}
