"""Wire formats the kubelet writes: resourceVersion as a number, ``metav1.MicroTime``, Go durations.

Small, kubelet-internal helpers (``apimachinery``'s ``MicroTime`` and Go's
``time.Duration.String()`` upstream). A shared home in :mod:`emulator.api` is
planned; until then every kubelet module imports them from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any


def _rv(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def micro_time(ts: float) -> str:
    """``metav1.MicroTime`` wire form (RFC 3339, microseconds), as Lease renewTime uses."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()`` of ``seconds`` truncated to milliseconds (as the kubelet prints pull times)."""
    ms = int(seconds * 1000 + 1e-6)
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    whole, frac = divmod(ms, 1000)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs}.{frac:03d}".rstrip("0").rstrip(".") + "s"
    if hours:
        return f"{hours}h{minutes}m{sec_text}"
    if minutes:
        return f"{minutes}m{sec_text}"
    return sec_text
