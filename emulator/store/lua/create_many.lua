-- kemu: many creates of one kind in one call, for the kinds commit.lua keeps no node room for (all but
-- pods and nodes; in a pod lifecycle, its five Events). Each object is written exactly as commit.lua's
-- op "c" writes it - precondition (the key is free, its namespace exists and is not terminating), the
-- next resourceVersion, the object, its version, its order entry, its owners in the dependents index,
-- its ADDED event on the kind's stream - without the per-call work of one script call per object
-- (26 arguments, the accounting code) and with each namespace read once per call.
--
-- KEYS[1] resourceVersion counter  KEYS[2] objects hash  KEYS[3] versions hash  KEYS[4] order zset
-- KEYS[5] the kind's event stream   KEYS[6] trim watermarks  KEYS[7] namespaces objects hash
-- KEYS[8] owners hash
-- ARGV[1] stream cap (0 = unbounded)  ARGV[2] prefix of dependents sets ("<prefix>dep:")
-- ARGV[3] the kind's resource; then five per object: field, head, tail (the encoded object split
-- around its resourceVersion, as for commit.lua), namespace that must exist ("" = none), owner uids
-- (comma-joined, "" = none).
--
-- Returns one element per object: its resourceVersion, or the reason it was refused
-- (exists, nonamespace, terminating), as commit.lua's {0, reason}.

local cap = tonumber(ARGV[1])
local out = {}
local namespaces = {}  -- namespace -> true or the refusal, read once per call
local appended = false
for i = 4, #ARGV, 5 do
  local field, ns, owners = ARGV[i], ARGV[i + 3], ARGV[i + 4]
  local refused
  if redis.call('HEXISTS', KEYS[3], field) == 1 then
    refused = 'exists'
  elseif ns ~= '' then
    local ok = namespaces[ns]
    if ok == nil then
      local nsobj = redis.call('HGET', KEYS[7], ns)
      ok = true
      if not nsobj then
        ok = 'nonamespace'
      elseif string.find(nsobj, 'Terminating', 1, true) then
        local decoded = cmsgpack.unpack(nsobj)
        if type(decoded) == 'table' and type(decoded['status']) == 'table'
            and decoded['status']['phase'] == 'Terminating' then
          ok = 'terminating'
        end
      end
      namespaces[ns] = ok
    end
    if ok ~= true then refused = ok end
  end
  if refused then
    out[#out + 1] = refused
  else
    local rv = redis.call('INCR', KEYS[1])
    local rvs = tostring(rv)
    local obj = ARGV[i + 1] .. string.char(0xa0 + #rvs) .. rvs .. ARGV[i + 2]
    redis.call('HSET', KEYS[2], field, obj)
    redis.call('HSET', KEYS[3], field, rvs)
    redis.call('ZADD', KEYS[4], 0, field)
    if owners ~= '' then
      local member = ARGV[3] .. '|' .. field
      for uid in string.gmatch(owners, '[^,]+') do redis.call('SADD', ARGV[2] .. uid, member) end
      redis.call('HSET', KEYS[8], field, owners)
    end
    redis.call('XADD', KEYS[5], rvs .. '-0', 't', 'ADDED', 'o', obj)
    out[#out + 1] = rv
    appended = true
  end
end
-- trim as commit.lua does, once per call (an eighth of the cap past it, down to the cap)
if appended and cap > 0 and redis.call('XLEN', KEYS[5]) > cap + math.floor(cap / 8) then
  redis.call('XTRIM', KEYS[5], 'MAXLEN', cap)
  local first = redis.call('XRANGE', KEYS[5], '-', '+', 'COUNT', 1)
  redis.call('HSET', KEYS[6], KEYS[5], first[1][1])
end
return out
