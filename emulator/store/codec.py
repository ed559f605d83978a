"""Object encoding for the store.

Objects are stored as msgpack of their Kubernetes JSON shape. The one subtle
part is the resourceVersion: it is assigned *inside* the commit script (the
counter is only read there, atomically with the write), yet the stored bytes
must carry it. Re-encoding in Lua is not an option (Lua tables cannot tell an
empty map from an empty list, and drop nulls), so the client encodes the
object with a unique placeholder as ``metadata.resourceVersion`` and sends the
bytes split around it; the script joins ``head + fixstr(rv) + tail``. msgpack's
encoding is deterministic, so the split is exact and costs one ``bytes.find``.
"""

from __future__ import annotations

from typing import Any

import msgpack
import ormsgpack

# A 16-byte placeholder no real object contains; msgpack encodes it as fixstr 0xb0 + bytes.
_MARKER = "\x00kemu-rv-splice\x00"
_MARKER_BYTES = b"\xb0" + _MARKER.encode()

_packer = msgpack.Packer(use_bin_type=True)

# Every process encodes what it writes and decodes every watch event it reads (a pod event is decoded
# in the scheduler, the controller manager and a kubelet shard), so the codec's speed is paid per event
# per process. ormsgpack (the msgpack sibling of orjson, keys cached) writes the very same bytes as
# msgpack's Packer(use_bin_type=True) - smallest encodings, str as str, bytes as bin, floats as float64 -
# in a fifth of the time, and decodes in half; anything it refuses (an int beyond 64 bits, a type it
# does not know, an ext type) goes to msgpack, so results and errors stay msgpack's.
_NON_STR_KEYS = ormsgpack.OPT_NON_STR_KEYS  # as strict_map_key=False: integer map keys decode
# What ormsgpack would write and msgpack refuses (or writes otherwise: a str subclass's, an enum's value)
# is left to msgpack.
_MSGPACK_TYPES_ONLY = (ormsgpack.OPT_PASSTHROUGH_DATACLASS | ormsgpack.OPT_PASSTHROUGH_DATETIME
                       | ormsgpack.OPT_PASSTHROUGH_ENUM | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
                       | ormsgpack.OPT_PASSTHROUGH_UUID)


def encode(obj: dict[str, Any]) -> bytes:
    try:
        return ormsgpack.packb(obj, option=_MSGPACK_TYPES_ONLY)
    except ormsgpack.MsgpackEncodeError:
        return _packer.pack(obj)


def decode(data: bytes) -> dict[str, Any]:
    try:
        return ormsgpack.unpackb(data, option=_NON_STR_KEYS)
    except ormsgpack.MsgpackDecodeError:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)


def encode_split(obj: dict[str, Any]) -> tuple[bytes, bytes]:
    """Encode ``obj`` with its resourceVersion left out, as (head, tail) around where it goes.

    ``obj`` is not modified: its metadata dict is shallow-copied to hold the placeholder.
    """
    meta = dict(obj.get("metadata") or {})
    meta["resourceVersion"] = _MARKER
    data = encode({**obj, "metadata": meta})
    at = data.find(_MARKER_BYTES)
    # The placeholder is unique, so this is the only hit; a second one would mean a user
    # planted it in a label, which the rfind check turns into a loud error, not corruption.
    if at < 0 or data.rfind(_MARKER_BYTES) != at:
        raise ValueError("object contains the store's reserved resourceVersion placeholder")
    return data[:at], data[at + len(_MARKER_BYTES) :]


def join(head: bytes, tail: bytes, rv: int) -> bytes:
    """The bytes the commit script stores for ``rv`` (used by tests to check the splice)."""
    s = str(rv).encode()
    return head + bytes([0xA0 + len(s)]) + s + tail
