"""Which validator checks which resource: the per-kind registry.

Upstream each API group's registry strategy calls its group's
``pkg/apis/<group>/validation`` function (``Validate``/``ValidateUpdate`` in
``pkg/registry/<group>/<kind>/strategy.go``). kemu's equivalent is one table
keyed by resource (``Kind.resource``) that each group module fills with
:func:`register` when it is imported; :func:`emulator.server.validation.validate`
looks the kind up there.
"""

from __future__ import annotations

from collections.abc import Callable

from emulator.api.errors import Cause
from emulator.api.types import Obj

__all__ = ["VALIDATORS", "Validator", "metadata_only", "register"]

# (object, the stored object on update or None, causes to append to)
Validator = Callable[[Obj, Obj | None, list[Cause]], None]

VALIDATORS: dict[str, Validator] = {}


def register(resource: str) -> Callable[[Validator], Validator]:
    """Decorator: ``fn`` validates ``resource`` (``Kind.resource``: ``"pods"``, ``"deployments.apps"``, ...)."""

    def add(fn: Validator) -> Validator:
        if resource in VALIDATORS:
            raise ValueError(f"two validators for {resource}: {VALIDATORS[resource].__qualname__} and "
                             f"{fn.__qualname__}")
        VALIDATORS[resource] = fn
        return fn

    return add


def metadata_only(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    """Kinds whose bodies kemu does not constrain beyond ObjectMeta (Event, Lease)."""
