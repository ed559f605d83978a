-- kemu: every write to the cluster state is this one script, so that checking
-- the caller's resourceVersion, taking the next value of the global counter,
-- storing the object and appending its watch event happen atomically.
--
-- KEYS[1] resourceVersion counter      KEYS[2] objects hash   (field -> msgpack)
-- KEYS[3] versions hash (field -> rv)  KEYS[4] order zset     (lexicographic keys, for paging)
-- KEYS[5] the kind's event stream      KEYS[6] trim watermarks (stream -> first retained id)
-- KEYS[7] the pod's node-shard stream  KEYS[8] namespaces objects hash
-- KEYS[9] owners hash (field -> "uid,uid") KEYS[10] garbage-collector queue (stream)
--
-- ARGV[1] op: "c" create, "u" update, "d" delete
-- ARGV[2] object field ("ns/name" or "name")
-- ARGV[3] expected resourceVersion ("" = no precondition; always given for u/d by the client)
-- ARGV[4] / ARGV[5] the encoded object split around its resourceVersion string
-- ARGV[6] stream cap (entries kept per stream; 0 = unbounded)
-- ARGV[7] "1" when KEYS[7] is a real shard stream
-- ARGV[8] namespace that must exist and not be terminating ("" = none)
-- ARGV[9] expected uid ("" = none), a delete precondition
-- ARGV[10] the object's owner uids, comma-joined (from metadata.ownerReferences; "" on delete)
-- ARGV[11] the object's own uid; ARGV[12] prefix of dependents sets ("<prefix>dep:")
-- ARGV[13] the object's resource ("pods", "replicasets.apps")
--
-- Dependents index: for every owner uid U, the set <prefix>dep:U holds "<resource>|<field>" of
-- the objects naming U in their ownerReferences, kept exact by this script, so the garbage
-- collector finds an owner's dependents without scanning. Deleting an object that has
-- dependents appends its uid to the collector's queue.
--
-- Returns {1, rv} on success or {0, reason[, detail]} with reason one of
-- exists, notfound, conflict, nonamespace, terminating, uid.

local op, field, expected = ARGV[1], ARGV[2], ARGV[3]
local cap = tonumber(ARGV[6])

local function append(stream, typ, obj, id)
  redis.call('XADD', stream, id, 't', typ, 'o', obj)
  if cap > 0 then
    local n = redis.call('XLEN', stream)
    -- trim in batches (an eighth of the cap) so the cost is amortised over writes
    if n > cap + math.floor(cap / 8) then
      redis.call('XTRIM', stream, 'MAXLEN', cap)
      local first = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
      redis.call('HSET', KEYS[6], stream, first[1][1])
    end
  end
end

local current = redis.call('HGET', KEYS[3], field)
if op == 'c' then
  if current then return {0, 'exists'} end
  local ns = ARGV[8]
  if ns ~= '' then
    local nsobj = redis.call('HGET', KEYS[8], ns)
    if not nsobj then return {0, 'nonamespace'} end
    local decoded = cmsgpack.unpack(nsobj)
    if type(decoded) == 'table' and type(decoded['status']) == 'table'
        and decoded['status']['phase'] == 'Terminating' then
      return {0, 'terminating'}
    end
  end
else
  if not current then return {0, 'notfound'} end
  if expected ~= '' and current ~= expected then return {0, 'conflict', current} end
  if ARGV[9] ~= '' then
    local uid = cmsgpack.unpack(redis.call('HGET', KEYS[2], field))['metadata']['uid']
    if uid ~= ARGV[9] then return {0, 'uid', tostring(uid)} end
  end
end

local rv = redis.call('INCR', KEYS[1])
local rvs = tostring(rv)
-- the client encoded the object around a placeholder; the rv is a msgpack fixstr (< 32 chars)
local obj = ARGV[4] .. string.char(0xa0 + #rvs) .. rvs .. ARGV[5]
local id = rvs .. '-0'
local typ
if op == 'd' then
  redis.call('HDEL', KEYS[2], field)
  redis.call('HDEL', KEYS[3], field)
  redis.call('ZREM', KEYS[4], field)
  typ = 'DELETED'
else
  redis.call('HSET', KEYS[2], field, obj)
  redis.call('HSET', KEYS[3], field, rvs)
  if op == 'c' then
    redis.call('ZADD', KEYS[4], 0, field)
    typ = 'ADDED'
  else
    typ = 'MODIFIED'
  end
end
-- keep the dependents index exact
local member = ARGV[13] .. '|' .. field
local old_owners = redis.call('HGET', KEYS[9], field) or ''
local new_owners = ARGV[10]
if old_owners ~= new_owners then
  local wanted = {}
  for uid in string.gmatch(new_owners, '[^,]+') do wanted[uid] = true end
  for uid in string.gmatch(old_owners, '[^,]+') do
    if not wanted[uid] then redis.call('SREM', ARGV[12] .. uid, member) end
  end
  for uid in pairs(wanted) do redis.call('SADD', ARGV[12] .. uid, member) end
  if new_owners == '' then redis.call('HDEL', KEYS[9], field) else redis.call('HSET', KEYS[9], field, new_owners) end
end
if op == 'd' and ARGV[11] ~= '' and redis.call('EXISTS', ARGV[12] .. ARGV[11]) == 1 then
  redis.call('XADD', KEYS[10], '*', 'uid', ARGV[11])
end
append(KEYS[5], typ, obj, id)
if ARGV[7] == '1' then append(KEYS[7], typ, obj, id) end
return {1, rv}
