"""``RemoveDuplicatesArgs`` (upstream ``types.go``, ``validation.go``): ``excludeOwnerKinds``, ``namespaces``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from emulator.descheduler.api import ArgsReader, Namespaces


@dataclass(frozen=True)
class RemoveDuplicatesArgs:
    exclude_owner_kinds: tuple[str, ...] = ()
    namespaces: Namespaces | None = None


def parse_args(raw: Any, path: str) -> RemoveDuplicatesArgs:
    r = ArgsReader(raw, path, ("excludeOwnerKinds", "namespaces"))
    return RemoveDuplicatesArgs(r.str_list("excludeOwnerKinds"), r.namespaces())
