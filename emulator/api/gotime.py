"""Time on the wire as Kubernetes writes it: ``metav1.MicroTime`` and Go's ``time.Duration.String()``.

``rfc3339`` (second precision, ``metav1.Time``) lives with the cluster clock in
:mod:`emulator.clock`; these two are the finer forms: Leases' ``renewTime`` /
``acquireTime`` (apimachinery ``MicroTime``) and durations in event messages
("Successfully pulled image ... in 1.5s", "back-off 5m0s restarting ...").
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

__all__ = ["go_duration", "micro_time", "parse_go_duration"]

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def micro_time(ts: float) -> str:
    """``metav1.MicroTime`` wire form: RFC 3339 with microseconds, UTC."""
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def go_duration(seconds: float) -> str:
    """Go's ``time.Duration.String()`` of ``seconds`` truncated to milliseconds: ``1.5s``, ``5m0s``, ``1h0m0s``."""
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


def parse_go_duration(value: str | float | int) -> float:
    """Seconds of a Go ``time.ParseDuration`` string (``10s``, ``1h30m``, ``500ms``); a bare number is seconds.

    Raises ``ValueError`` for anything else (a negative duration included).
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip()
        if text == "0":
            return 0.0
        pos, seconds = 0, 0.0
        for match in _PART.finditer(text):
            if match.start() != pos:
                break
            seconds += float(match.group(1)) * _UNITS[match.group(2)]
            pos = match.end()
        if not text or pos != len(text):
            raise ValueError(f"{value!r} is not a duration (e.g. 10s, 15m, 1h30m)")
    if seconds < 0:
        raise ValueError(f"{value!r} must not be negative")
    return seconds
