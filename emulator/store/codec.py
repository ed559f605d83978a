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

# A 16-byte placeholder no real object contains; msgpack encodes it as fixstr 0xb0 + bytes.
_MARKER = "\x00kemu-rv-splice\x00"
_MARKER_BYTES = b"\xb0" + _MARKER.encode()

_packer = msgpack.Packer(use_bin_type=True)


def encode(obj: dict[str, Any]) -> bytes:
    return _packer.pack(obj)


def decode(data: bytes) -> dict[str, Any]:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def encode_split(obj: dict[str, Any]) -> tuple[bytes, bytes]:
    """Encode ``obj`` with its resourceVersion left out, as (head, tail) around where it goes.

    ``obj`` is not modified: its metadata dict is shallow-copied to hold the placeholder.
    """
    meta = dict(obj.get("metadata") or {})
    meta["resourceVersion"] = _MARKER
    data = _packer.pack({**obj, "metadata": meta})
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
