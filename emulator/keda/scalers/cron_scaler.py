"""The ``cron`` scaler: desired replicas inside a cron window (kedacore/keda ``pkg/scalers/cron_scaler.go``).

Metadata: ``timezone`` (IANA name), ``start`` and ``end`` (5-field cron expressions),
``desiredReplicas``. Inside the window — the next ``end`` comes before the next
``start`` — the metric is ``desiredReplicas`` and the trigger is active; outside it is
1 and inactive. The target is an AverageValue of 1, so the HPA asks for exactly
``desiredReplicas``. Time is the cluster clock. Cron expressions support ``*``,
numbers, ranges, lists and steps (robfig/cron's standard parser without descriptors).
"""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from emulator.api.types import Obj
from emulator.keda.scalers.base import ScalerConfig, ScalerError, external_spec, get_int, get_str

NAME = "cron"
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))


def _field(text: str, low: int, high: int) -> tuple[frozenset[int], bool]:
    """The values one cron field allows, and whether it was a bare ``*``."""
    values: set[int] = set()
    for part in text.split(","):
        rng, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if rng == "*":
            start, end = low, high
        elif "-" in rng:
            a, b = rng.split("-", 1)
            start, end = int(a), int(b)
        else:
            start = int(rng)
            end = high if step_text else start
        if start < low or end > high or start > end or step <= 0:
            raise ValueError(f"{part!r} is out of range {low}-{high}")
        values.update(range(start, end + 1, step))
    if high == 6 and 7 in values:
        values.add(0)
    return frozenset(values), text == "*"


class Cron:
    """A parsed 5-field cron expression with :meth:`next` (robfig/cron ``SpecSchedule.Next``)."""

    def __init__(self, text: str) -> None:
        parts = text.split()
        if len(parts) != 5:
            raise ValueError(f"expected exactly 5 fields, found {len(parts)}: {text!r}")
        bounds = list(_BOUNDS)
        bounds[4] = (0, 7)
        parsed = [_field(p, lo, hi) for p, (lo, hi) in zip(parts, bounds, strict=True)]
        (self.minute, _), (self.hour, _), (self.dom, dom_star), (self.month, _), (self.dow, dow_star) = parsed
        self.any_day = dom_star or dow_star

    def _day_matches(self, t: dt.datetime) -> bool:
        dom, dow = t.day in self.dom, (t.isoweekday() % 7) in self.dow
        return (dom and dow) if self.any_day else (dom or dow)

    def next(self, after: dt.datetime) -> dt.datetime:
        t = after.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
        limit = after + dt.timedelta(days=366 * 5)
        while t < limit:
            if t.month not in self.month:
                t = (t.replace(day=1, hour=0, minute=0) + dt.timedelta(days=32)).replace(day=1)
            elif not self._day_matches(t):
                t = t.replace(hour=0, minute=0) + dt.timedelta(days=1)
            elif t.hour not in self.hour:
                t = t.replace(minute=0) + dt.timedelta(hours=1)
            elif t.minute not in self.minute:
                t += dt.timedelta(minutes=1)
            else:
                return t
        raise ValueError("the expression never matches")


class CronScaler:
    def __init__(self, config: ScalerConfig) -> None:
        self.config = config
        tz = get_str(config, NAME, "timezone", required=True)
        try:
            self.zone = ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise ScalerError(f"error parsing {NAME} metadata: unable to load timezone {tz!r}") from None
        self.start_text = get_str(config, NAME, "start", required=True)
        self.end_text = get_str(config, NAME, "end", required=True)
        try:
            self.start, self.end = Cron(self.start_text), Cron(self.end_text)
        except ValueError as e:
            raise ScalerError(f"error parsing {NAME} metadata: error parsing schedule: {e}") from None
        if self.start_text == self.end_text:
            raise ScalerError(f"error parsing {NAME} metadata: start and end can not have exactly same time input")
        self.desired = get_int(config, NAME, "desiredReplicas")
        self.tz_text = tz

    def metric_specs(self) -> list[Obj]:
        return [external_spec(self.config, f"cron-{self.tz_text}-{self.start_text}-{self.end_text}", 1.0)]

    def metrics_and_activity(self, metric_name: str) -> tuple[list[float], bool]:
        now = dt.datetime.fromtimestamp(self.config.env.now(), self.zone)
        if self.end.next(now) < self.start.next(now):
            return [float(self.desired)], True
        return [1.0], False

    def close(self) -> None:
        return None
