"""Time on the wire as Kubernetes writes it: ``metav1.MicroTime`` and Go's ``time.Duration.String()``.

``rfc3339`` (second precision, ``metav1.Time``) lives with the cluster clock in
:mod:`emulator.clock`; these two are the finer forms: Leases' ``renewTime`` /
``acquireTime`` (apimachinery ``MicroTime``) and durations in event messages
("Successfully pulled image ... in 1.5s", "back-off 5m0s restarting ...").
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["go_duration", "micro_time"]


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
