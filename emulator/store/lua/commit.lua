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
-- ARGV[14] accounting role: "pod", "node" or ""
-- ARGV[15] for a pod: "node|res=n,res=n|PROTO/port@ip;..." while it holds resources on a node
--          (bound, not finished), else ""; for a node: its allocatable "res=n,res=n" ("" on delete)
-- ARGV[16] "1" when this write binds the pod and must fit the node (a scheduler's bind)
--
-- Node room: <prefix>cap:N holds node N's allocatable, <prefix>alloc:N the sum of the requests of
-- the pods holding resources on N, <prefix>ports:N its used host ports ("PROTO/port" -> ips).
-- A binding write fails with noroom / noport instead of over-committing the node, so competing
-- schedulers can bind optimistically and the loser finds out atomically.
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
    -- decode only a namespace whose bytes can hold the phase (most creates land in an active one)
    if string.find(nsobj, 'Terminating', 1, true) then
      local decoded = cmsgpack.unpack(nsobj)
      if type(decoded) == 'table' and type(decoded['status']) == 'table'
          and decoded['status']['phase'] == 'Terminating' then
        return {0, 'terminating'}
      end
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

-- node room accounting (checked before anything is written)
local pfx = ARGV[12]:sub(1, -5)  -- "<prefix>dep:" -> "<prefix>"
local function parse_acct(s)
  if s == '' then return nil end
  local node, res, ports = string.match(s, '^([^|]*)|([^|]*)|(.*)$')
  local r = {}
  for k, v in string.gmatch(res, '([^=,]+)=([^,]+)') do r[k] = tonumber(v) end
  local p = {}
  for port in string.gmatch(ports, '[^;]+') do p[#p + 1] = port end
  return {node = node, res = r, ports = p}
end
local function hash_numbers(key)
  local flat = redis.call('HGETALL', key)
  local out = {}
  for i = 1, #flat, 2 do out[flat[i]] = tonumber(flat[i + 1]) end
  return out
end
local acct_old, acct_new
if ARGV[14] == 'pod' then
  acct_old = redis.call('HGET', pfx .. 'acct', ARGV[13] .. '|' .. field) or ''
  acct_new = ARGV[15]
  -- only a binding write checks the node's room (a status write parses nothing here)
  local n = ARGV[16] == '1' and parse_acct(acct_new) or nil
  local o = n and parse_acct(acct_old) or nil
  if n and not (o and o.node == n.node) then
    local cap = hash_numbers(pfx .. 'cap:' .. n.node)
    local alloc = hash_numbers(pfx .. 'alloc:' .. n.node)
    for res, v in pairs(n.res) do
      if v > 0 and (alloc[res] or 0) + v > (cap[res] or 0) then return {0, 'noroom', res} end
    end
    for _, port in ipairs(n.ports) do
      local pp, ip = string.match(port, '^(.*)@(.*)$')
      local used = redis.call('HGET', pfx .. 'ports:' .. n.node, pp)
      if used then
        for other in string.gmatch(used, '[^,]+') do
          if other == ip or other == '0.0.0.0' or ip == '0.0.0.0' then return {0, 'noport', pp} end
        end
      end
    end
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
-- a create has none: every delete (this script) drops the object's entry
local old_owners = ''
if op ~= 'c' then old_owners = redis.call('HGET', KEYS[9], field) or '' end
local new_owners = ARGV[10]
if old_owners ~= new_owners then
  local member = ARGV[13] .. '|' .. field
  local wanted = {}
  for uid in string.gmatch(new_owners, '[^,]+') do wanted[uid] = true end
  for uid in string.gmatch(old_owners, '[^,]+') do
    if not wanted[uid] then redis.call('SREM', ARGV[12] .. uid, member) end
  end
  for uid in pairs(wanted) do redis.call('SADD', ARGV[12] .. uid, member) end
  if new_owners == '' then redis.call('HDEL', KEYS[9], field) else redis.call('HSET', KEYS[9], field, new_owners) end
end
if ARGV[14] == 'pod' and acct_old ~= acct_new then
  local o, n = parse_acct(acct_old), parse_acct(acct_new)
  local function release(a, sign)
    for res, v in pairs(a.res) do redis.call('HINCRBY', pfx .. 'alloc:' .. a.node, res, sign * v) end
    for _, port in ipairs(a.ports) do
      local pp, ip = string.match(port, '^(.*)@(.*)$')
      local key = pfx .. 'ports:' .. a.node
      local used = redis.call('HGET', key, pp) or ''
      if sign > 0 then
        redis.call('HSET', key, pp, used == '' and ip or (used .. ',' .. ip))
      else
        local keep = {}
        local dropped = false
        for other in string.gmatch(used, '[^,]+') do
          if other == ip and not dropped then dropped = true else keep[#keep + 1] = other end
        end
        if #keep == 0 then redis.call('HDEL', key, pp) else redis.call('HSET', key, pp, table.concat(keep, ',')) end
      end
    end
  end
  if o then release(o, -1) end
  if n then release(n, 1) end
  local akey = ARGV[13] .. '|' .. field
  if acct_new == '' then redis.call('HDEL', pfx .. 'acct', akey) else redis.call('HSET', pfx .. 'acct', akey, acct_new) end
elseif ARGV[14] == 'node' then
  redis.call('DEL', pfx .. 'cap:' .. field)
  for k, v in string.gmatch(ARGV[15], '([^=,]+)=([^,]+)') do redis.call('HSET', pfx .. 'cap:' .. field, k, v) end
end
if op == 'd' and ARGV[11] ~= '' and redis.call('EXISTS', ARGV[12] .. ARGV[11]) == 1 then
  redis.call('XADD', KEYS[10], '*', 'uid', ARGV[11])
end
append(KEYS[5], typ, obj, id)
if ARGV[7] == '1' then append(KEYS[7], typ, obj, id) end
return {1, rv}
