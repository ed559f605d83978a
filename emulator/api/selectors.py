"""Label and field selectors: one import point for both.

The selectors live apart, as upstream's ``k8s.io/apimachinery/pkg/labels``
and ``pkg/fields`` do: :mod:`emulator.api.labels` (``LabelSelector``, the
operators) and :mod:`emulator.api.fields` (``FieldSelector``). This module
re-exports both, for the many callers that use one of each.
"""

from __future__ import annotations

from emulator.api.fields import FieldSelector, parse_field_selector
from emulator.api.labels import (
    DOES_NOT_EXIST,
    DOUBLE_EQUALS,
    EQUALS,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_EQUALS,
    NOT_IN,
    LabelSelector,
    Requirement,
    parse_label_selector,
)

__all__ = [
    "DOES_NOT_EXIST",
    "DOUBLE_EQUALS",
    "EQUALS",
    "EXISTS",
    "GREATER_THAN",
    "IN",
    "LESS_THAN",
    "NOT_EQUALS",
    "NOT_IN",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "parse_field_selector",
    "parse_label_selector",
]
