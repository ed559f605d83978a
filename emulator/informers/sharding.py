"""Node-shard filters for the sharded pod informer.

A kubelet shard ``N`` hosts the nodes whose ``store.shard_of(name) == N``.
Its pod informer watches the shard's own stream (``stream_key(POD, N)``: the
commit script appends every event of a pod bound to one of those nodes), so
its watch costs nothing for other shards' pods. Its *list* has no such
stream: Redis keeps one hash of all pods, and no field selector says "node in
shard N" (there is no such field, and a node-name selector would need one
term per node).

The list therefore reads every pod and keeps the shard's - but most of that
cost is decoding (~10 us a pod), and :func:`shard_raw_filter` avoids it: it
finds ``spec.nodeName`` in the stored msgpack bytes with ``bytes.find`` and
hashes it, so only the shard's own pods (1/shards of them) are decoded.

Cost, measured by ``loadgen/bench_informers.py`` on the 2-core reference
machine (100,000 pods bound to 2,000 nodes, 16 shards, paged by 1,000):

==========================================  ==========  =========
list                                        pods kept   seconds
==========================================  ==========  =========
every pod (a scheduler's informer)          100,000     2.5-3.5
one shard, decoding every pod               6,100       3.1-4.1
one shard, with :func:`shard_raw_filter`    6,100       0.5-0.75
==========================================  ==========  =========

So a shard's relist still transfers every pod's bytes from Redis (the same
traffic as a full list) but costs about a fifth of the CPU. A store-side
per-shard index (a set of pod keys per shard, kept by the commit script)
would cut the transfer too; it is left for when kubelet-shard relists show up
in profiles (they happen at start and after a 410, not in steady state).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import Any

# msgpack of the map key "nodeName": fixstr header 0xa8 (a str of length 8) + the bytes.
_NODE_NAME_KEY = b"\xa8nodeName"


def _msgpack_str_at(raw: bytes, i: int) -> bytes | None:
    """The msgpack string starting at ``raw[i]``, or None if none starts there."""
    if i >= len(raw):
        return None
    head = raw[i]
    if 0xA0 <= head <= 0xBF:  # fixstr
        n, start = head - 0xA0, i + 1
    elif head == 0xD9:  # str 8
        if i + 1 >= len(raw):
            return None
        n, start = raw[i + 1], i + 2
    elif head == 0xDA:  # str 16
        n, start = int.from_bytes(raw[i + 1 : i + 3], "big"), i + 3
    else:
        return None
    return raw[start : start + n]


def shard_raw_filter(node_shards: int, shard: int) -> Callable[[bytes], bool]:
    """A pre-filter on encoded pods: False only for pods certainly not bound to a node of ``shard``.

    Every string value that follows a ``"nodeName"`` key anywhere in the object is a
    candidate (a label or annotation may also be called nodeName); the pod passes if any
    candidate hashes to the shard. The real ``spec.nodeName`` is always among the candidates,
    so no pod of the shard is ever dropped; the few false positives are removed by
    :func:`shard_object_filter` after decoding.
    """

    def keep(raw: bytes) -> bool:
        at = raw.find(_NODE_NAME_KEY)
        while at >= 0:
            name = _msgpack_str_at(raw, at + len(_NODE_NAME_KEY))
            if name and zlib.crc32(name) % node_shards == shard:
                return True
            at = raw.find(_NODE_NAME_KEY, at + 1)
        return False

    return keep


def shard_object_filter(node_shards: int, shard: int) -> Callable[[dict[str, Any]], bool]:
    """Exact test on a decoded pod: bound to a node of ``shard`` (same hash as ``Store.shard_of``)."""

    def keep(obj: dict[str, Any]) -> bool:
        node = (obj.get("spec") or {}).get("nodeName")
        return bool(node) and zlib.crc32(node.encode()) % node_shards == shard

    return keep
