"""The ``cron`` scaler: desired replicas inside a cron window (kedacore/keda ``pkg/scalers/cron_scaler.go``).

Metadata: ``timezone`` (IANA name), ``start`` and ``end`` (cron expressions, robfig/cron's
standard parser: :mod:`emulator.api.cron`, shared with CronJobs), ``desiredReplicas``.
Inside the window — the next ``end`` comes before the next ``start`` — the metric is
``desiredReplicas`` and the trigger is active; outside it is 1 and inactive. The target
is an AverageValue of 1, so the HPA asks for exactly ``desiredReplicas``. Time is the
cluster clock.
"""

from __future__ import annotations

from emulator.api import cron
from emulator.api.types import Obj
from emulator.keda.scalers.base import ScalerConfig, ScalerError, external_spec, get_int, get_str

NAME = "cron"


class CronScaler:
    def __init__(self, config: ScalerConfig) -> None:
        self.config = config
        self.tz = get_str(config, NAME, "timezone", required=True)
        try:
            cron.location(self.tz)
        except cron.CronError:
            raise ScalerError(f"error parsing {NAME} metadata: unable to load timezone {self.tz!r}") from None
        self.start_text = get_str(config, NAME, "start", required=True)
        self.end_text = get_str(config, NAME, "end", required=True)
        try:
            self.start, self.end = cron.parse(self.start_text), cron.parse(self.end_text)
        except cron.CronError as e:
            raise ScalerError(f"error parsing {NAME} metadata: error parsing schedule: {e}") from None
        if self.start_text == self.end_text:
            raise ScalerError(f"error parsing {NAME} metadata: start and end can not have exactly same time input")
        self.desired = get_int(config, NAME, "desiredReplicas")

    def metric_specs(self) -> list[Obj]:
        return [external_spec(self.config, f"cron-{self.tz}-{self.start_text}-{self.end_text}", 1.0)]

    def metrics_and_activity(self, metric_name: str) -> tuple[list[float], bool]:
        now = self.config.env.now()
        next_start, next_end = self.start.next_after(now, self.tz), self.end.next_after(now, self.tz)
        if next_end is not None and (next_start is None or next_end < next_start):
            return [float(self.desired)], True
        return [1.0], False

    def close(self) -> None:
        return None
