"""One API request as the REST handlers see it: :class:`Call`, :class:`Result` and the query parameters.

The parsing upstream's ``staging/src/k8s.io/apiserver/pkg/endpoints/handlers``
does before a verb runs: boolean and integer parameters (400 when malformed),
``dryRun`` and ``fieldValidation`` (422 ``Unsupported value`` naming the
option, as the ``meta.k8s.io`` options kinds report them), and the field
manager (``fieldManager``, else the User-Agent's product token,
``managerOrUserAgent``).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emulator.api import errors
from emulator.api.kinds import Kind
from emulator.api.types import Obj
from emulator.apiserver import openapi
from emulator.apiserver.content import Wanted
from emulator.apiserver.routing import RequestInfo

__all__ = ["DRY_RUN_VALUES", "Call", "Result", "check_field_validation", "dry_run", "field_manager", "options_invalid",
           "query_bool", "query_int", "query_list", "unknown_field_warnings"]

_FIELD_MANAGER_MAX = 128
DRY_RUN_VALUES = ("All",)
_FIELD_VALIDATION_VALUES = ("Ignore", "Warn", "Strict")


@dataclass
class Call:
    """One API request as the handlers see it."""

    info: RequestInfo
    query: Mapping[str, str]
    headers: Mapping[str, str]
    body: bytes
    wanted: Wanted

    @property
    def kind(self) -> Kind:
        return self.info.kind


@dataclass
class Result:
    """What a handler answers: a JSON-able body (or raw bytes), its status code, optional content type."""

    body: Any
    status: int = 200
    content_type: str | None = None
    encoded: bytes | None = None
    # Warning headers (upstream's "299 -" warnings), e.g. unknown fields under fieldValidation=Warn.
    warnings: tuple[str, ...] = ()


# ----------------------------------------------------------------------------- query parameters
def query_bool(call: Call, name: str) -> bool:
    value = call.query.get(name)
    if value is None or value == "":
        return False
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise errors.bad_request(f'invalid boolean value "{value}" for parameter {name}')


def query_int(call: Call, name: str) -> int | None:
    value = call.query.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f'invalid integer value "{value}" for parameter {name}') from None


def options_invalid(options_kind: str, field: str, value: Any, supported: tuple[str, ...]) -> errors.StatusError:
    allowed = ", ".join(f'"{s}"' for s in supported)
    cause = errors.Cause(field, f'Unsupported value: "{value}": supported values: {allowed}', "FieldValueNotSupported")
    return errors.invalid(options_kind, "", [cause], "meta.k8s.io")


def dry_run(call: Call, options_kind: str) -> bool:
    values = [v for v in query_list(call, "dryRun") if v]
    for v in values:
        if v not in DRY_RUN_VALUES:
            raise options_invalid(options_kind, "dryRun", v, DRY_RUN_VALUES)
    return bool(values)


def query_list(call: Call, name: str) -> list[str]:
    getlist = getattr(call.query, "getlist", None)
    if getlist is not None:
        return list(getlist(name))
    value = call.query.get(name)
    return [] if value is None else [value]


def check_field_validation(call: Call, options_kind: str) -> None:
    value = call.query.get("fieldValidation")
    if value and value not in _FIELD_VALIDATION_VALUES:
        raise options_invalid(options_kind, "fieldValidation", value, _FIELD_VALIDATION_VALUES)


def unknown_field_warnings(call: Call, options_kind: str, kind: Kind, obj: Obj) -> tuple[str, ...]:
    """``fieldValidation`` checked, then applied to ``obj`` (:func:`.openapi.field_validation`)."""
    check_field_validation(call, options_kind)
    return openapi.field_validation(call.query.get("fieldValidation") or "Warn", kind, obj)


def field_manager(call: Call, required: bool = False) -> str:
    """``fieldManager``, else the User-Agent before its first ``/`` (upstream ``managerOrUserAgent``)."""
    manager = call.query.get("fieldManager") or ""
    if manager:
        if len(manager) > _FIELD_MANAGER_MAX:
            raise errors.invalid("PatchOptions", "", [errors.Cause("fieldManager", "Too long: may not be more than "
                                                                   "128 bytes", "FieldValueTooLong")], "meta.k8s.io")
        return manager
    if required:
        return ""
    agent = (call.headers.get("user-agent") or "").split("/", 1)[0]
    printable = "".join(ch for ch in agent if unicodedata.category(ch)[0] not in ("C", "Z") or ch == " ")
    return printable[:_FIELD_MANAGER_MAX]


# ----------------------------------------------------------------------------- helpers
