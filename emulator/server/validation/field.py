"""Field errors and the generic field checks every group's validation uses.

Upstream ``k8s.io/apimachinery/pkg/util/validation/field`` (``field.Error``
and its ``ErrorBody()`` texts: Invalid, Required, Forbidden, NotSupported,
Duplicate, TooLong, and the ``CauseType`` reasons), plus the label, selector
and int-or-percent checks of ``apimachinery/pkg/apis/meta/v1/validation`` and
``pkg/apis/apps/validation``. kemu validates raw JSON, so the ``*_at`` helpers
also report a value of the wrong JSON type (``FieldValueTypeInvalid``) where
upstream would fail to decode.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from emulator.api.errors import Cause, render_value
from emulator.api.labels import LabelSelector
from emulator.api.names import (
    label_value_errors,
    qualified_name_errors,
)
from emulator.api.names import regex_error as _regex_error
from emulator.api.types import Obj

INVALID = "FieldValueInvalid"


INVALID = "FieldValueInvalid"
REQUIRED = "FieldValueRequired"


REQUIRED = "FieldValueRequired"
FORBIDDEN = "FieldValueForbidden"


FORBIDDEN = "FieldValueForbidden"
NOT_SUPPORTED = "FieldValueNotSupported"


NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"


DUPLICATE = "FieldValueDuplicate"
TOO_LONG = "FieldValueTooLong"


TOO_LONG = "FieldValueTooLong"
TYPE_INVALID = "FieldValueTypeInvalid"


FIELD_IMMUTABLE = "field is immutable"  # apimachinery api/validation FieldImmutableErrorMsg
IS_NEGATIVE = "must be greater than or equal to 0"  # api/validation IsNegativeErrorMsg
NOT_POSITIVE = "must be greater than zero"  # core/validation isNotPositiveErrorMsg
NOT_INTEGER = "must be an integer"  # core/validation isNotIntegerErrorMsg


def invalid(causes: list[Cause], path: str, value: Any, detail: str) -> None:
    msg = f"Invalid value: {render_value(value)}: {detail}" if detail else f"Invalid value: {render_value(value)}"
    causes.append(Cause(path, msg, INVALID))


def required(causes: list[Cause], path: str, detail: str = "") -> None:
    causes.append(Cause(path, f"Required value: {detail}" if detail else "Required value", REQUIRED))


def forbidden(causes: list[Cause], path: str, detail: str) -> None:
    causes.append(Cause(path, f"Forbidden: {detail}" if detail else "Forbidden", FORBIDDEN))


def not_supported(causes: list[Cause], path: str, value: Any, supported: Iterable[str]) -> None:
    allowed = ", ".join(json.dumps(s) for s in supported)
    causes.append(Cause(path, f"Unsupported value: {render_value(value)}: supported values: {allowed}", NOT_SUPPORTED))


def duplicate(causes: list[Cause], path: str, value: Any, detail: str = "") -> None:
    msg = f"Duplicate value: {render_value(value)}"
    causes.append(Cause(path, f"{msg}: {detail}" if detail else msg, DUPLICATE))


def too_long(causes: list[Cause], path: str, max_bytes: int) -> None:
    causes.append(Cause(path, f"Too long: must have at most {max_bytes} bytes", TOO_LONG))


def wrong_type(causes: list[Cause], path: str, value: Any, expected: str) -> None:
    # Upstream rejects these while decoding; kemu holds raw JSON, so it reports them here.
    causes.append(Cause(path, f"Invalid value: {render_value(value)}: must be {expected}", TYPE_INVALID))


def dict_at(causes: list[Cause], path: str, value: Any) -> Obj:
    """``value`` if it is a JSON object (or absent: ``{}``); otherwise record a type cause."""
    if isinstance(value, dict):
        return value
    if value is not None:
        wrong_type(causes, path, value, "an object")
    return {}


def list_at(causes: list[Cause], path: str, value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if value is not None:
        wrong_type(causes, path, value, "an array")
    return []


def int_at(causes: list[Cause], path: str, value: Any) -> int | None:
    """``value`` if it is a JSON integer; ``None`` (with a type cause unless absent) otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value is not None:
        wrong_type(causes, path, value, "an integer")
    return None


_PERCENT_FMT = "[0-9]+%"


_PERCENT_FMT = "[0-9]+%"
_PERCENT_RE = re.compile(_PERCENT_FMT)


_PERCENT_RE = re.compile(_PERCENT_FMT)
_PERCENT_MSG = _regex_error("a valid percent string must be a numeric string followed by an ending '%'",
                            _PERCENT_FMT, "1%", "93%")


def check_label_name(causes: list[Cause], path: str, key: Any) -> None:
    """meta/v1/validation ``ValidateLabelName``: a qualified name."""
    if not isinstance(key, str):
        wrong_type(causes, path, key, "a string")
        return
    for msg in qualified_name_errors(key):
        invalid(causes, path, key, msg)


def check_labels(causes: list[Cause], path: str, labels: Any) -> None:
    """meta/v1/validation ``ValidateLabels``: upstream reports every problem at the map's path."""
    for key, value in dict_at(causes, path, labels).items():
        check_label_name(causes, path, key)
        if not isinstance(value, str):
            wrong_type(causes, path, value, "a string")
            continue
        for msg in label_value_errors(value):
            invalid(causes, path, value, msg)


def objects_at(causes: list[Cause], path: str, value: Any) -> Iterator[tuple[str, Obj]]:
    """Each object of the list at ``path``, with its own path; an item that is no object is a type error, skipped."""
    for i, item in enumerate(list_at(causes, path, value)):
        p = f"{path}[{i}]"
        if isinstance(item, dict):
            yield p, item
        else:
            wrong_type(causes, p, item, "an object")


def check_operator_values(causes: list[Cause], path: str, op: Any, values: list[Any], *,
                          numeric: bool = False) -> None:
    """A selector requirement's operator and how many values it takes: In/NotIn some, Exists/DoesNotExist none,
    and (``numeric``: node selectors) Gt/Lt exactly one."""
    if op in ("In", "NotIn"):
        if not values:
            required(causes, path + ".values", "must be specified when `operator` is 'In' or 'NotIn'")
    elif op in ("Exists", "DoesNotExist"):
        if values:
            forbidden(causes, path + ".values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
    elif numeric and op in ("Gt", "Lt"):
        if len(values) != 1:
            required(causes, path + ".values", "must be specified single value when `operator` is 'Lt' or 'Gt'")
    else:
        invalid(causes, path + ".operator", op, "not a valid selector operator")


def check_label_selector(causes: list[Cause], path: str, selector: Any) -> bool:
    """meta/v1/validation ``ValidateLabelSelector`` (strict label values). True if it can be evaluated."""
    n = len(causes)
    sel = dict_at(causes, path, selector)
    check_labels(causes, path + ".matchLabels", sel.get("matchLabels"))
    exprs_path = path + ".matchExpressions"
    for p, expr in objects_at(causes, exprs_path, sel.get("matchExpressions")):
        values = list_at(causes, p + ".values", expr.get("values"))
        check_operator_values(causes, p, expr.get("operator"), values)
        check_label_name(causes, p + ".key", expr.get("key", ""))
        for j, value in enumerate(values):
            if not isinstance(value, str):
                wrong_type(causes, f"{p}.values[{j}]", value, "a string")
                continue
            for msg in label_value_errors(value):
                invalid(causes, f"{p}.values[{j}]", value, msg)
    return len(causes) == n


def selector_is_empty(selector: Obj) -> bool:
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def selector_matches(selector: Obj, labels: Obj) -> bool:
    """``LabelSelectorAsSelector(sel).Matches(labels)`` for a selector :func:`check_label_selector` passed."""
    return LabelSelector.from_dict(selector).matches(labels)


def _int_or_percent(value: Any) -> tuple[int | None, bool]:
    """(number, is_percent) for a well-formed IntOrString; (None, _) when malformed."""
    if isinstance(value, bool):
        return None, False
    if isinstance(value, int):
        return value, False
    if isinstance(value, str) and _PERCENT_RE.fullmatch(value):
        return int(value[:-1]), True
    return None, isinstance(value, str)


def check_positive_int_or_percent(causes: list[Cause], path: str, value: Any) -> int | None:
    """apps/validation ``ValidatePositiveIntOrPercent`` plus ``IsNotMoreThan100Percent``."""
    number, is_percent = _int_or_percent(value)
    if number is None:
        if isinstance(value, str):
            invalid(causes, path, value, _PERCENT_MSG)
        else:
            invalid(causes, path, value, "must be an integer or percentage (e.g '5%%')")
        return None
    if not is_percent and number < 0:
        invalid(causes, path, number, IS_NEGATIVE)
    if is_percent and number > 100:
        invalid(causes, path, value, "must not be greater than 100%")
    return number


def check_nonnegative(causes: list[Cause], path: str, value: Any) -> None:
    number = int_at(causes, path, value)
    if number is not None and number < 0:
        invalid(causes, path, number, IS_NEGATIVE)


def check_enum(causes: list[Cause], path: str, value: Any, allowed: tuple[str, ...]) -> None:
    """An optional enum: absent is defaulted elsewhere, "" is Required, others must be listed."""
    if value is None or value in allowed:
        return
    if value == "":
        required(causes, path)
    else:
        not_supported(causes, path, value, allowed)
