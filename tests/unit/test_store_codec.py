"""The store codec writes msgpack's bytes and reads them back as msgpack does (whichever library does the work)."""

from __future__ import annotations

import dataclasses
import datetime
import math
from typing import Any

import msgpack
import pytest

from emulator.api.quantity import Format
from emulator.store import codec
from tests import builders as b


def reference_encode(obj: Any) -> bytes:
    """The format's definition: what msgpack's Packer(use_bin_type=True) writes."""
    return msgpack.Packer(use_bin_type=True).pack(obj)


def reference_decode(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


class Name(str):
    pass


@dataclasses.dataclass
class Point:
    x: int


INTS = [0, 1, -1, 31, 32, 127, 128, 255, 256, -32, -33, -128, -129, 65535, 65536, 2**31 - 1, 2**31, 2**32,
        -(2**31) - 1, 2**63 - 1, -(2**63), 2**64 - 1]
CASES: dict[str, Any] = {
    "pod": b.pod("p", node="n1", labels={"app": "web"}),
    "node": b.node("n1"),
    "ints at every encoding boundary": {"ints": INTS},
    "floats": {"f": [0.0, -0.0, 1.5, 0.1, 1e300, -1e-300, math.inf]},
    "strings of every length class": {"s": ["", "a", "x" * 31, "x" * 32, "x" * 255, "x" * 256, "x" * 65536]},
    "unicode": {"é漢字": "🙂 ünïcödé"},
    "bytes": {"b": [b"", b"\x00\xff", b"z" * 300]},
    "null and bools": {"n": None, "t": True, "f": False},
    "maps and arrays of 15, 16 and 65536 entries": {
        "m15": {str(i): i for i in range(15)}, "m16": {str(i): i for i in range(16)},
        "a15": list(range(15)), "a16": list(range(16)), "big": {str(i): [i] for i in range(65536)}},
    "empty containers": {"m": {}, "a": [], "nested": {"m": {"a": [{}]}}},
    "a tuple (an array)": {"t": (1, "two", None)},
    "a str subclass": {Name("k"): Name("v")},
    "a StrEnum": {"format": Format.BINARY_SI},
    "integer map keys": {1: "one", 2: {3: 4}},
}


@pytest.mark.parametrize("obj", list(CASES.values()), ids=list(CASES))
def test_codec_writes_msgpacks_bytes_and_reads_them_back(obj: Any) -> None:
    data = codec.encode(obj)
    assert data == reference_encode(obj)
    assert codec.decode(data) == reference_decode(data)


def test_nan_round_trips_as_msgpack_writes_it() -> None:
    data = codec.encode({"x": math.nan})
    assert data == reference_encode({"x": math.nan})
    assert math.isnan(codec.decode(data)["x"])


@pytest.mark.parametrize("obj", [{"big": 2**64}, {"small": -(2**63) - 1}, {"when": datetime.datetime(2024, 1, 1)},
                                 {"p": Point(1)}, {"surrogate": "\ud800"}],
                         ids=["int-beyond-64-bits", "int-below-int64", "datetime", "dataclass", "lone-surrogate"])
def test_what_msgpack_refuses_fails_the_same_way(obj: Any) -> None:
    with pytest.raises(Exception) as expected:
        reference_encode(obj)
    with pytest.raises(type(expected.value)):
        codec.encode(obj)


def test_split_encoding_joins_to_the_stored_bytes() -> None:
    pod = b.pod("p", node="n1")
    head, tail = codec.encode_split(pod)
    stored = codec.join(head, tail, 1234)
    assert stored == reference_encode({**pod, "metadata": {**pod["metadata"], "resourceVersion": "1234"}})
    assert codec.decode(stored)["metadata"]["resourceVersion"] == "1234"
