"""Quantities and resource names: ``pkg/apis/core/validation`` resource checks.

Upstream ``ValidateResourceQuantityValue``, ``validateContainerResourceName``,
``ValidateResourceRequirements`` and the resource-name predicates of
``pkg/apis/core/helper`` (standard, native, extended, integer resources).
Parsed quantities and checked names are memoised: this runs on every pod create.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from emulator.api.errors import Cause
from emulator.api.names import MEMO_LIMIT as _MEMO_LIMIT
from emulator.api.names import qualified_name_errors
from emulator.api.quantity import Quantity, QuantityError, parse_quantity
from emulator.api.types import Obj
from emulator.server.validation.field import IS_NEGATIVE, NOT_INTEGER, dict_at, invalid, required, wrong_type

# raw JSON value -> (parsed Quantity, its sign), or the parse error message. Clusters reuse few
# spellings ("100m", "128Mi"), so after warm-up validation does no parsing at all.
_QUANTITY_MEMO: dict[Any, tuple[Quantity, int] | str] = {}

# The finest unit kemu accounts resources in (pods.py, the scheduler and the kubelet sum requests as
# exact integer nanounits); upstream's ``Nano`` scale, the finest a parsed quantity keeps.
_NANO_SCALE = -9
TOO_LARGE = "must be less than 1e992 (kemu accounts quantities as exact integers of nanounits)"


def quantity(raw: Any) -> tuple[Quantity, int] | str:
    """``raw`` parsed as upstream ``resource.ParseQuantity`` does, with its sign; or the error message.

    Upstream's parser (apimachinery ``pkg/api/resource/quantity.go``) has no upper bound: its limits
    are that the exponent after ``e`` parses as an int64 (``strconv.ParseInt(..., 10, 64)`` in
    suffix.go ``interpret``, else ErrSuffix) and that BinarySI values are capped at 2^63-1
    (``maxAllowed``); ``1e1000`` parses, and ``MilliValue()`` later overflows int64 silently. kemu
    computes exactly instead, so a quantity too large for :meth:`Quantity.scaled_value` at nano
    scale (what every consumer of a stored object computes) is refused here, at the field, rather
    than failing every reader of the object later (docs/architecture.md, Simplifications).
    """
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        return f"a quantity must be a string or a number, not {type(raw).__name__}"
    key = (type(raw), raw)
    hit = _QUANTITY_MEMO.get(key)
    if hit is None:
        try:
            q = parse_quantity(raw)
        except QuantityError as exc:
            hit = str(exc)
        else:
            try:
                q.scaled_value(_NANO_SCALE)  # raises QuantityError past the exact-integer bound
                hit = (q, q.sign())
            except QuantityError:
                hit = TOO_LARGE
        if len(_QUANTITY_MEMO) >= _MEMO_LIMIT:
            _QUANTITY_MEMO.clear()
        _QUANTITY_MEMO[key] = hit
    return hit


def validate_quantity(value: Any, path: str, causes: list[Cause], non_negative: bool = True) -> Quantity | None:
    """Parse ``value`` as a resource quantity; record a cause at ``path`` if it is malformed
    (or negative when ``non_negative``). Returns the quantity, or ``None`` when malformed."""
    hit = quantity(value)
    if isinstance(hit, str):
        invalid(causes, path, value, hit)
        return None
    q, sign = hit
    if non_negative and sign < 0:
        invalid(causes, path, str(q), IS_NEGATIVE)
    return q


def is_integral(q: Quantity) -> bool:
    """Whether a quantity is a whole number (upstream ``MilliValue() % 1000 == 0``)."""
    try:
        return q.milli_value() % 1000 == 0
    except QuantityError:  # too large to express in millis: certainly not a resource count
        return False


_HUGEPAGES_PREFIX = "hugepages-"


_HUGEPAGES_PREFIX = "hugepages-"
_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


# pkg/apis/core/helper: standardResources (names usable without a domain prefix).
_STANDARD_RESOURCES = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "services", "replicationcontrollers",
    "resourcequotas", "secrets", "persistentvolumeclaims", "storage", "requests.storage",
    "services.nodeports", "services.loadbalancers", "configmaps",
})


# pkg/apis/core/helper: integerResources (counts, never fractional).
_INTEGER_RESOURCES = frozenset({
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
})


def _is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain-prefixed name outside kubernetes.io."""
    if _is_native_resource(name) or name.startswith("requests."):
        return False
    return not qualified_name_errors("requests." + name)


def is_integer_resource(name: str) -> bool:
    return name in _INTEGER_RESOURCES or is_extended_resource(name)


# resource name -> upstream detail messages from validateContainerResourceName (empty = valid).
_CONTAINER_RESOURCE_NAME_MEMO: dict[str, list[str]] = {}


def resource_name_errors(name: str) -> list[str]:
    """core/validation ``validateResourceName``."""
    errs = qualified_name_errors(name)
    if errs:
        return list(errs)
    if "/" not in name and name not in _STANDARD_RESOURCES and not name.startswith(_HUGEPAGES_PREFIX):
        return ["must be a standard resource type or fully qualified"]
    return []


def container_resource_name_errors(name: str) -> list[str]:
    """core/validation ``validateContainerResourceName``."""
    hit = _CONTAINER_RESOURCE_NAME_MEMO.get(name)
    if hit is not None:
        return hit
    errs = resource_name_errors(name)
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith(_HUGEPAGES_PREFIX):
            errs.append("must be a standard resource for containers")
    elif not _is_native_resource(name) and not is_extended_resource(name):
        errs.append("doesn't follow extended resource name standard")
    if len(_CONTAINER_RESOURCE_NAME_MEMO) >= _MEMO_LIMIT:
        _CONTAINER_RESOURCE_NAME_MEMO.clear()
    _CONTAINER_RESOURCE_NAME_MEMO[name] = errs
    return errs


def check_resource_list(causes: list[Cause], path: str, resources: Any,
                        name_errors: Callable[[str], list[str]] | None,
                        non_negative: bool = True) -> dict[str, Quantity]:
    """Validate a ResourceList (``{name: quantity}``) keyed at ``path[name]``; return the parsed ones."""
    parsed: dict[str, Quantity] = {}
    for name, raw in dict_at(causes, path, resources).items():
        if name_errors is not None:
            for msg in name_errors(name):
                invalid(causes, f"{path}[{name}]", name, msg)
        hit = quantity(raw)
        if isinstance(hit, str):
            invalid(causes, f"{path}[{name}]", raw, hit)
            continue
        q, sign = hit
        if non_negative and sign < 0:
            invalid(causes, f"{path}[{name}]", str(q), IS_NEGATIVE)
        elif "/" in name and is_integer_resource(name) and not is_integral(q):
            invalid(causes, f"{path}[{name}]", str(q), NOT_INTEGER)
        parsed[name] = q
    return parsed


def check_resource_requirements(causes: list[Cause], path: str, res: Obj) -> None:
    """core/validation ``validateResourceRequirements`` for a container.

    Names must be container resources, quantities non-negative (integers for extended
    resources), every request at most its limit, and extended resources (not overcommittable)
    must have request == limit. Hugepages' divisibility and cpu/memory pairing are not checked.
    """
    limits = check_resource_list(causes, path + ".limits", res.get("limits"), container_resource_name_errors)
    requests = res.get("requests")
    if not requests:
        if requests is not None and not isinstance(requests, dict):
            wrong_type(causes, path + ".requests", requests, "an object")
        return
    req = check_resource_list(causes, path + ".requests", requests, container_resource_name_errors)
    for name, q in req.items():
        extended = "/" in name and is_extended_resource(name)
        limit = limits.get(name)
        if limit is not None:
            # Upstream reports these at ".requests" itself, not at ".requests[name]".
            if extended and q != limit:
                invalid(causes, path + ".requests", str(q), f"must be equal to {name} limit of {limit}")
            elif q > limit:
                invalid(causes, path + ".requests", str(q), f"must be less than or equal to {name} limit of {limit}")
        elif extended and name not in (res.get("limits") or {}):
            required(causes, path + ".limits", "Limit must be set for non overcommitable resources")
