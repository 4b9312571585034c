-- Sets the store clock's correction (µs added to the server's TIME; the
-- clock key is the only key) from ARGV[1], the value the engine read (''
-- for none), to ARGV[2], unless another engine set it meanwhile: engines
-- that saw the same jump of a new primary's clock agree on one value.
-- Answers the value held after ('' for none).
local held = redis.call('GET', CLOCK) or ''
if held == ARGV[1] then
  redis.call('SET', CLOCK, ARGV[2])
  held = ARGV[2]
end
return held
