"""Cron schedules as CronJob's ``spec.schedule`` reads them: parsing and the next activation time.

Upstream the CronJob controller parses schedules with ``github.com/robfig/cron/v3``'s
standard parser (five fields: minute hour day-of-month month day-of-week, plus the
``@yearly``/``@monthly``/``@weekly``/``@daily``/``@hourly`` descriptors) and computes
activations in ``spec.timeZone`` (the controller's local zone, UTC here, when unset).
This module re-states that grammar (``parser.go``: ranges, steps, ``*``/``?``, month
and weekday names; day-of-month and day-of-week are OR-ed when both are restricted)
and ``SpecSchedule.Next`` (``spec.go``: advance the first field that does not match,
resetting the smaller ones), over :mod:`zoneinfo` for the time zone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_MONTHS = {n: i + 1 for i, n in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                            "nov", "dec"))}
_DAYS = {n: i for i, n in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_DESCRIPTORS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}
# (low, high, names) per field, parser.go's bounds.
_FIELDS = ((0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, _MONTHS), (0, 6, _DAYS))


class CronError(ValueError):
    """A schedule the standard parser rejects (upstream's message text)."""


@dataclass(frozen=True)
class Schedule:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    dom_star: bool  # the day-of-month field was * or ?: then only day-of-week restricts (and vice versa)
    dow_star: bool

    def _day_matches(self, t: datetime) -> bool:
        dom, dow = t.day in self.days, (t.isoweekday() % 7) in self.weekdays
        if self.dom_star or self.dow_star:
            return dom and dow
        return dom or dow

    def next_after(self, after: float, tz: str | None = None) -> float | None:
        """The first activation strictly after ``after`` (epoch seconds), or None within five years (``Next``)."""
        zone = location(tz)
        t = datetime.fromtimestamp(int(after) // 60 * 60 + 60, tz=zone)
        year_limit = t.year + 5
        while t.year <= year_limit:
            if t.month not in self.months:
                t = (t.replace(day=1, hour=0, minute=0) + timedelta(days=32)).replace(day=1)
                t = t.replace(tzinfo=zone)
                continue
            if not self._day_matches(t):
                t = (t.replace(hour=0, minute=0) + timedelta(days=1)).replace(tzinfo=zone)
                continue
            if t.hour not in self.hours:
                t = (t.replace(minute=0) + timedelta(hours=1)).replace(tzinfo=zone)
                continue
            if t.minute not in self.minutes:
                t = t + timedelta(minutes=1)
                continue
            return t.timestamp()
        return None


def location(tz: str | None) -> tzinfo:
    """``time.LoadLocation``: UTC for None/""/"UTC"; CronError for an unknown zone."""
    if not tz or tz == "UTC":
        return UTC
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise CronError(f"unknown time zone {tz}") from None


def _value(text: str, names: dict[str, int], spec: str) -> int:
    if text.lower() in names:
        return names[text.lower()]
    if not text.isdigit():
        raise CronError(f"failed to parse int from {text}: strconv.Atoi: parsing {text!r}: invalid syntax"
                        .replace("'", '"'))
    return int(text)


def _field(text: str, low: int, high: int, names: dict[str, int], spec: str) -> tuple[frozenset[int], bool]:
    out: set[int] = set()
    star = False
    for part in text.split(","):
        rng, _, step_text = part.partition("/")
        step = 1
        if step_text:
            step = _value(step_text, {}, spec)
            if step <= 0:
                raise CronError(f"step of range should be a positive number: {part}")
        if rng in ("*", "?"):
            start, end = low, high
            star = star or not step_text
        else:
            a, dash, b = rng.partition("-")
            start = _value(a, names, spec)
            end = _value(b, names, spec) if dash else (high if step_text else start)
        if start < low:
            raise CronError(f"beginning of range ({start}) below minimum ({low}): {part}")
        if end > high:
            raise CronError(f"end of range ({end}) above maximum ({high}): {part}")
        if start > end:
            raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {part}")
        out.update(range(start, end + 1, step))
    return frozenset(out), star


def parse(spec: str) -> Schedule:
    """Parse a standard five-field spec or descriptor; CronError as robfig/cron's ParseStandard words it."""
    text = spec.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise CronError("cannot use TZ or CRON_TZ in schedule, use timeZone field instead")
    if text.startswith("@"):
        if text.startswith("@every"):
            raise CronError("@every is not supported by kemu's cron parser")
        if text not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {text}")
        text = _DESCRIPTORS[text]
    parts = text.split()
    if len(parts) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(parts)}: {parts}".replace("'", ""))
    sets = [_field(p, lo, hi, names, spec) for p, (lo, hi, names) in zip(parts, _FIELDS, strict=True)]
    return Schedule(sets[0][0], sets[1][0], sets[2][0], sets[3][0], sets[4][0], sets[2][1], sets[4][1])
