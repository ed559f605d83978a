"""Behaviour curves as arrays: one curve per container row, evaluated for all rows at once.

The vectorised half of the behaviour profiles (:mod:`emulator.kubelet.profiles`
resolves a profile into one :class:`ResolvedCurve` per container and field;
this module stores them in a :class:`CurveSet` — a kind code and five numbers
per row — and evaluates every row of a kind with a few array operations), as
the kubelet model (:mod:`emulator.kubelet.model`) needs it every tick.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["NPARAMS", "CurveKind", "CurveSet", "ResolvedCurve"]

NPARAMS = 5


class CurveKind:
    """Curve kind codes stored in :attr:`CurveSet.kind` (0 = no curve, evaluates to 0)."""

    NONE = 0
    CONSTANT = 1
    RAMP = 2
    SINE = 3
    SPIKE = 4
    LEAK = 5
    REPLAY = 6

    NAMES: dict[str, int] = {"constant": 1, "ramp": 2, "sine": 3, "spike": 4, "leak": 5, "replay": 6}



@dataclass(frozen=True)
class ResolvedCurve:
    """One container's curve with every parameter a number: what :class:`CurveSet` stores in a row."""

    kind: int
    params: tuple[float, ...]  # NPARAMS numbers, meaning per kind (see CurveSet)
    series: tuple[tuple[float, float], ...] = ()
    linear: bool = False
    loop: bool = False

    def value_at(self, t: float) -> float:
        """Scalar evaluation (tests and debugging); the hot path is :meth:`CurveSet.evaluate`."""
        curves = CurveSet(1)
        curves.assign(0, self)
        return float(curves.evaluate(np.array([t]))[0])


# -- vectorised evaluation --------------------------------------------------------------


class CurveSet:
    """One curve per row, evaluated for all rows at once.

    Parameters per kind (``params[:, 0..4]``):

    ======== ====================================================
    constant value
    ramp     from, to, over
    sine     low, high, period, phase
    spike    base, peak, every, width, offset
    leak     start, rate (per second), max (inf: none)
    replay   ``series[row]`` indexes a shared, deduplicated series
    ======== ====================================================

    Rows of kind ``NONE`` evaluate to 0. Indexes of rows per kind are rebuilt
    lazily after assignments, so a tick costs a few array operations per kind
    present, not per row.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self.kind = np.zeros(capacity, dtype=np.int8)
        self.params = np.zeros((capacity, NPARAMS), dtype=np.float64)
        self.series = np.full(capacity, -1, dtype=np.int32)
        self._series: list[tuple[np.ndarray, np.ndarray, bool, bool]] = []
        self._series_ids: dict[tuple[Any, ...], int] = {}
        self._groups: list[tuple[int, np.ndarray, tuple[np.ndarray, ...]]] | None = None
        self._replay_groups: list[tuple[int, np.ndarray]] = []

    @property
    def capacity(self) -> int:
        return len(self.kind)

    def grow(self, capacity: int) -> None:
        if capacity <= self.capacity:
            return
        extra = capacity - self.capacity
        self.kind = np.concatenate([self.kind, np.zeros(extra, dtype=np.int8)])
        self.params = np.concatenate([self.params, np.zeros((extra, NPARAMS))])
        self.series = np.concatenate([self.series, np.full(extra, -1, dtype=np.int32)])
        self._groups = None

    def assign(self, row: int, curve: ResolvedCurve) -> None:
        self.kind[row] = curve.kind
        self.params[row] = curve.params
        if curve.kind == CurveKind.REPLAY:
            key = (curve.series, curve.linear, curve.loop)
            sid = self._series_ids.get(key)
            if sid is None:
                sid = len(self._series)
                times = np.array([t for t, _ in curve.series], dtype=np.float64)
                values = np.array([v for _, v in curve.series], dtype=np.float64)
                self._series.append((times, values, curve.linear, curve.loop))
                self._series_ids[key] = sid
            self.series[row] = sid
        else:
            self.series[row] = -1
        self._groups = None

    def clear(self, rows: np.ndarray | int) -> None:
        self.kind[rows] = CurveKind.NONE
        self.series[rows] = -1
        self._groups = None

    def _index(self) -> list[tuple[int, np.ndarray, tuple[np.ndarray, ...]]]:
        """Rows per kind, with each kind's parameters pre-gathered (and pre-combined) into
        contiguous columns, so a tick gathers only ``t`` and scatters the values."""
        if self._groups is None:
            groups = []
            for k in np.unique(self.kind):
                if k == CurveKind.NONE:
                    continue
                rows = np.flatnonzero(self.kind == k)
                p = self.params[rows]
                cols: tuple[np.ndarray, ...] = ()
                if k == CurveKind.CONSTANT:
                    cols = (p[:, 0].copy(),)
                elif k == CurveKind.RAMP:
                    # over == 0: already at "to".
                    start = np.where(p[:, 2] > 0, p[:, 0], p[:, 1])
                    inv_over = np.divide(1.0, p[:, 2], out=np.zeros(len(rows)), where=p[:, 2] > 0)
                    cols = (start, p[:, 1] - start, inv_over)
                elif k == CurveKind.SINE:
                    omega = (2.0 * np.pi) / p[:, 2]
                    cols = (p[:, 0], (p[:, 1] - p[:, 0]) * 0.5, omega, omega * p[:, 3])
                elif k == CurveKind.SPIKE:
                    cols = (p[:, 0].copy(), p[:, 1].copy(), p[:, 2].copy(), p[:, 3].copy(), p[:, 4].copy())
                elif k == CurveKind.LEAK:
                    cols = (p[:, 0].copy(), p[:, 1].copy(), p[:, 2].copy())
                groups.append((int(k), rows, cols))
            self._groups = groups
            replay_rows = np.flatnonzero(self.kind == CurveKind.REPLAY)
            sids = self.series[replay_rows]
            self._replay_groups = [(int(s), replay_rows[sids == s]) for s in np.unique(sids)]
        return self._groups

    def evaluate(self, t: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Values at per-row local times ``t`` (seconds since each row's container started)."""
        values = np.zeros(self.capacity) if out is None else out
        if out is not None:
            values.fill(0.0)
        for kind, rows, cols in self._index():
            if kind == CurveKind.CONSTANT:
                values[rows] = cols[0]
                continue
            if kind == CurveKind.REPLAY:
                for sid, srows in self._replay_groups:
                    values[srows] = self._replay(sid, t[srows])
                continue
            tr = t[rows]
            if kind == CurveKind.RAMP:
                start, delta, inv_over = cols
                values[rows] = start + delta * np.clip(tr * inv_over, 0.0, 1.0)
            elif kind == CurveKind.SINE:
                low, half, omega, phase = cols
                values[rows] = low + half * (1.0 + np.sin(omega * tr + phase))
            elif kind == CurveKind.SPIKE:
                base, peak, every, width, offset = cols
                values[rows] = np.where(np.mod(tr - offset, every) < width, peak, base)
            elif kind == CurveKind.LEAK:
                start, rate, most = cols
                values[rows] = np.minimum(start + rate * tr, most)
        np.maximum(values, 0.0, out=values)  # usage is never negative (a shrinking leak stops at 0)
        return values

    def _replay(self, sid: int, t: np.ndarray) -> np.ndarray:
        times, values, linear, loop = self._series[sid]
        if loop:
            t = np.mod(t, times[-1])
        if linear:
            return np.interp(t, times, values)
        idx = np.searchsorted(times, t, side="right") - 1
        return values[np.clip(idx, 0, len(values) - 1)]
