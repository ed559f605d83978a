"""What every printer builds on: columns, printers, and upstream's cell formatting rules.

Upstream ``pkg/printers/internalversion/printers.go`` formats cells with a few
shared helpers (``translateTimestampSince`` / ``duration.HumanDuration`` ages,
``layoutContainerCells``, ``metav1.FormatLabelSelector``,
``labels.FormatLabels``); they live here, beside :class:`Column` and
:class:`Printer`, so the printer modules (:mod:`.tables`,
:mod:`.tables_workloads`, :mod:`.tables_autoscaling`) import them without
importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339

Cell = str | int | bool | float | None

NAME_DOC = "Name must be unique within a namespace. Is required when creating resources."
AGE_DOC = ("CreationTimestamp is a timestamp representing the server time when this object was created. "
            "It is not guaranteed to be set in happens-before order across separate operations.")


@dataclass(frozen=True)
class Column:
    name: str
    type: str = "string"
    description: str = ""
    priority: int = 0
    format: str = ""

    def definition(self) -> Obj:
        return {"name": self.name, "type": self.type, "format": self.format, "description": self.description,
                "priority": self.priority}


NAME = Column("Name", format="name", description=NAME_DOC)
AGE = Column("Age", description=AGE_DOC)


@dataclass(frozen=True)
class Printer:
    columns: tuple[Column, ...]
    cells: Callable[[Obj, float], list[Cell]]

    def definitions(self) -> list[Obj]:
        return [c.definition() for c in self.columns]


# ----------------------------------------------------------------------------- formatting helpers
def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``: ``45s``, ``3m12s``, ``25m``, ``5h3m``, ``20h``, ``3d4h``, ``90d``, ``2y30d``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


@lru_cache(maxsize=65536)
def timestamp(value: str) -> float | None:
    # Lists of many objects created in the same second repeat their timestamps: parse each once.
    try:
        return parse_rfc3339(value)
    except ValueError:
        return None


def since(value: Any, now: float) -> str:
    """``translateTimestampSince``: the age of an RFC 3339 timestamp, ``<unknown>`` when unset."""
    ts = timestamp(value) if isinstance(value, str) and value else None
    return "<unknown>" if ts is None else human_duration(now - ts)


def age(obj: Obj, now: float) -> str:
    return since((obj.get("metadata") or {}).get("creationTimestamp"), now)


def name_of(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def containers_cells(template_spec: Obj) -> list[Cell]:
    """``layoutContainerCells``: container names and images, comma-joined."""
    containers = template_spec.get("containers") or []
    return [",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers)]


def selector_string(selector: Any) -> str:
    """``metav1.FormatLabelSelector``: ``<none>`` for an empty selector, the selector string otherwise."""
    if not isinstance(selector, dict) or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return "<none>"
    try:
        return str(LabelSelector.from_dict(selector)) or "<none>"
    except Exception:  # a selector that does not parse prints as upstream's "<error>"
        return "<error>"


def format_labels(labels: Any) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` pairs, ``<none>`` when empty."""
    if not isinstance(labels, dict) or not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def int_or_string(value: Any) -> str:
    return "N/A" if value is None else str(value)




WIDE_WORKLOAD = (
    Column("Containers", priority=1, description="Names of each container in the template."),
    Column("Images", priority=1, description="Images referenced by each container in the template."),
    Column("Selector", priority=1, description="Label selector for pods."),
)
