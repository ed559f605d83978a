"""Label and field selectors: one import point for both.

The selectors live apart, as upstream's ``k8s.io/apimachinery/pkg/labels``
and ``pkg/fields`` do: :mod:`emulator.api.labels` (``LabelSelector``, the
operators) and :mod:`emulator.api.fields` (``FieldSelector``). This module
re-exports both selector types, for the many callers that use one of each;
the operator names are imported from :mod:`emulator.api.labels`, where they live.
"""

from __future__ import annotations

from emulator.api.fields import FieldSelector, parse_field_selector
from emulator.api.labels import LabelSelector, Requirement, parse_label_selector

__all__ = ["FieldSelector", "LabelSelector", "Requirement", "parse_field_selector", "parse_label_selector"]
