"""metadata.uid: a random version-4 UUID, formatted as RFC 4122 says (as Python's uuid module does)."""

from __future__ import annotations

import uuid

import pytest

from emulator.server import defaults


@pytest.mark.parametrize("raw", [bytes(16), b"\xff" * 16, bytes(range(16)), bytes(range(240, 256)),
                                 b"\x12\x34\x56\x78\x9a\xbc\xde\xf0" * 2],
                         ids=["zeros", "ones", "ascending", "high", "pattern"])
def test_uid_is_the_version_4_uuid_of_the_random_bytes(monkeypatch: pytest.MonkeyPatch, raw: bytes) -> None:
    monkeypatch.setattr(defaults.os, "urandom", lambda n: raw[:n])
    # uuid.UUID(bytes=..., version=4) sets the version nibble and the variant bits over the same bytes.
    assert defaults.new_uid() == str(uuid.UUID(bytes=raw, version=4))


def test_uids_are_random_v4() -> None:
    uids = [defaults.new_uid() for _ in range(2000)]
    assert len(set(uids)) == len(uids)
    parsed = [uuid.UUID(u) for u in uids]
    assert all(p.version == 4 and p.variant == uuid.RFC_4122 and str(p) == u
               for p, u in zip(parsed, uids, strict=True))
