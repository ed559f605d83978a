"""Node affinity: node selector terms, required and preferred node affinity, upstream semantics.

Upstream ``staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go``
(``NodeSelector``, ``RequiredNodeAffinity``, ``PreferredSchedulingTerms``,
``nodeSelectorRequirementsAsSelector`` / ``AsFieldSelector``). The scheduler's
NodeAffinity, PodTopologySpread and VolumeBinding plugins, the kubelet's
admission and the DaemonSet controller all match nodes with these types.

Each type answers in two shapes: :meth:`matches` for one node (labels and
name: the reference semantics) and :meth:`mask` over every node at once, for
the scheduler's vectorised filters. The array form reads the nodes through
:class:`NodeColumns`, which the scheduler's snapshot implements; this module
does not import the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from emulator.api.labels import parse_int64
from emulator.api.names import label_value_errors, qualified_name_errors

__all__ = [
    "NodeColumns",
    "NodeSelectorTerm",
    "RequiredNodeAffinity",
    "WeightedTerms",
    "is_empty_term",
    "parse_node_selector_term",
    "parse_preferred_terms",
]


class LabelValues(Protocol):
    """One label key across every node: ``codes[i]`` indexes the distinct values, -1 for "no such label"."""

    @property
    def codes(self) -> np.ndarray: ...

    def mask(self, test: Callable[[str], bool], absent: bool) -> np.ndarray: ...


class NodeColumns(Protocol):
    """The nodes as columns: what :meth:`NodeSelectorTerm.mask` reads (the scheduler's ``Snapshot``)."""

    @property
    def num_nodes(self) -> int: ...

    def label_column(self, key: str) -> LabelValues: ...

    def index_of(self, name: str) -> int | None: ...


_LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_NAME_FIELD = "metadata.name"

LabelRequirement = tuple[str, str, tuple[str, ...]]
FieldRequirement = tuple[str, str, str]


def _label_requirement(expr: Mapping[str, Any], path: str, errors: list[str]) -> LabelRequirement | None:
    """One ``matchExpressions`` entry as labels.NewRequirement accepts it; problems go to ``errors``."""
    key = expr.get("key") or ""
    operator = expr.get("operator") or ""
    values = tuple(expr.get("values") or ())
    before = len(errors)
    if operator not in _LABEL_OPERATORS:
        errors.append(f"{path}.operator: Unsupported value: {operator!r}: not a valid node selector operator")
    for msg in qualified_name_errors(key):
        errors.append(f"{path}.key: Invalid value: {key!r}: {msg}")
    if operator in ("In", "NotIn") and not values:
        errors.append(f"{path}.values: Required value: for 'in', 'notin' operators, values set can't be empty")
    elif operator in ("Exists", "DoesNotExist") and values:
        errors.append(f"{path}.values: Forbidden: values set must be empty for exists and does not exist")
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            errors.append(f"{path}.values: Required value: for 'Gt', 'Lt' operators, exactly one value is required")
        elif parse_int64(values[0]) is None:
            errors.append(f"{path}.values[0]: Invalid value: {values[0]!r}: "
                          "for 'Gt', 'Lt' operators, the value must be an integer")
    for j, value in enumerate(values):
        for msg in label_value_errors(value):
            errors.append(f"{path}.values[{j}]: Invalid value: {value!r}: {msg}")
    return None if len(errors) != before else (key, operator, values)


def _field_requirement(expr: Mapping[str, Any], path: str, errors: list[str]) -> FieldRequirement | None:
    """One ``matchFields`` entry: In/NotIn with exactly one value (nodeSelectorRequirementsAsFieldSelector)."""
    operator = expr.get("operator") or ""
    values = list(expr.get("values") or ())
    if operator not in ("In", "NotIn"):
        errors.append(f"{path}.operator: Unsupported value: {operator!r}: supported values: \"In\", \"NotIn\"")
        return None
    if len(values) != 1:
        errors.append(f"{path}.values: Invalid value: {values!r}: must have one element")
        return None
    return (expr.get("key") or "", operator, values[0])


def _label_ok(req: LabelRequirement, labels: Mapping[str, str]) -> bool:
    key, operator, values = req
    value = labels.get(key)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    number = parse_int64(value) if value is not None else None
    if number is None:
        return False
    bound = int(values[0])
    return number > bound if operator == "Gt" else number < bound


def _label_mask(req: LabelRequirement, snapshot: NodeColumns) -> np.ndarray:
    key, operator, values = req
    column = snapshot.label_column(key)
    if operator == "Exists":
        return column.codes >= 0
    if operator == "DoesNotExist":
        return column.codes < 0
    if operator in ("In", "NotIn"):
        wanted = frozenset(values)
        if operator == "In":
            return column.mask(wanted.__contains__, absent=False)
        return column.mask(lambda v: v not in wanted, absent=True)
    bound = int(values[0])

    def compare(v: str) -> bool:
        number = parse_int64(v)
        return number is not None and (number > bound if operator == "Gt" else number < bound)

    return column.mask(compare, absent=False)


def _field_ok(req: FieldRequirement, node_name: str) -> bool:
    key, operator, value = req
    actual = node_name if key == _NAME_FIELD else ""  # a node's field set has only metadata.name
    return (actual == value) if operator == "In" else (actual != value)


def _field_mask(req: FieldRequirement, snapshot: NodeColumns) -> np.ndarray:
    key, operator, value = req
    mask = np.zeros(snapshot.num_nodes, dtype=bool)
    if key == _NAME_FIELD:
        index = snapshot.index_of(value)
        if index is not None:
            mask[index] = True
    elif value == "":
        mask[:] = True
    return mask if operator == "In" else ~mask


@dataclass(frozen=True)
class NodeSelectorTerm:
    """A parsed ``NodeSelectorTerm``: its label requirements AND its field requirements.

    ``None`` means the term had no ``matchExpressions`` (or ``matchFields``);
    a term with neither matches nothing.
    """

    expressions: tuple[LabelRequirement, ...] | None
    fields: tuple[FieldRequirement, ...] | None

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if self.expressions is None and self.fields is None:
            return False
        if self.expressions is not None and not all(_label_ok(r, labels) for r in self.expressions):
            return False
        return self.fields is None or all(_field_ok(r, node_name) for r in self.fields)

    def mask(self, snapshot: NodeColumns) -> np.ndarray:
        if self.expressions is None and self.fields is None:
            return np.zeros(snapshot.num_nodes, dtype=bool)
        mask = np.ones(snapshot.num_nodes, dtype=bool)
        for req in self.expressions or ():
            mask &= _label_mask(req, snapshot)
        for freq in self.fields or ():
            mask &= _field_mask(freq, snapshot)
        return mask


def is_empty_term(term: Mapping[str, Any] | None) -> bool:
    return not term or (not term.get("matchExpressions") and not term.get("matchFields"))


def parse_node_selector_term(term: Mapping[str, Any], path: str = "") -> tuple[NodeSelectorTerm | None, list[str]]:
    """Parse one term (``newNodeSelectorTerm``); returns (term, []) or (None, errors)."""
    errors: list[str] = []
    expressions = fields = None
    if term.get("matchExpressions"):
        parsed = [_label_requirement(e, f"{path}.matchExpressions[{i}]", errors)
                  for i, e in enumerate(term["matchExpressions"])]
        expressions = tuple(r for r in parsed if r is not None)
    if term.get("matchFields"):
        fparsed = [_field_requirement(e, f"{path}.matchFields[{i}]", errors) for i, e in enumerate(term["matchFields"])]
        fields = tuple(r for r in fparsed if r is not None)
    if errors:
        return None, errors
    return NodeSelectorTerm(expressions, fields), []


@dataclass(frozen=True)
class RequiredNodeAffinity:
    """``spec.nodeSelector`` AND the required node affinity terms, ORed (``nodeaffinity.RequiredNodeAffinity``).

    Terms that fail to parse are dropped and the rest still apply, as
    upstream's ``LazyErrorNodeSelector`` does.
    """

    node_selector: tuple[tuple[str, str], ...]
    terms: tuple[NodeSelectorTerm, ...] | None

    @classmethod
    def of(cls, node_selector: Mapping[str, str], affinity: Mapping[str, Any] | None) -> RequiredNodeAffinity:
        required = ((affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        terms: tuple[NodeSelectorTerm, ...] | None = None
        if required is not None:
            parsed = []
            for i, term in enumerate(required.get("nodeSelectorTerms") or ()):
                if is_empty_term(term):
                    continue  # a nil or empty term selects no objects
                compiled, _ = parse_node_selector_term(term, f"nodeSelectorTerms[{i}]")
                if compiled is not None:
                    parsed.append(compiled)
            terms = tuple(parsed)
        return cls(tuple(node_selector.items()), terms)

    def matches(self, labels: Mapping[str, str], node_name: str) -> bool:
        if any(labels.get(k) != v for k, v in self.node_selector):
            return False
        return self.terms is None or any(t.matches(labels, node_name) for t in self.terms)

    def mask(self, snapshot: NodeColumns) -> np.ndarray:
        mask = np.ones(snapshot.num_nodes, dtype=bool)
        for key, value in self.node_selector:
            mask &= snapshot.label_column(key).mask(lambda v, want=value: v == want, absent=False)
        if self.terms is not None:
            any_term = np.zeros(snapshot.num_nodes, dtype=bool)
            for term in self.terms:
                any_term |= term.mask(snapshot)
            mask &= any_term
        return mask


WeightedTerms = tuple[tuple[int, NodeSelectorTerm], ...]


def parse_preferred_terms(terms: Sequence[Mapping[str, Any]], path: str = "") -> tuple[WeightedTerms, list[str]]:
    """``NewPreferredSchedulingTerms``: weight-0 and empty terms dropped; any parse error fails the whole list."""
    parsed: list[tuple[int, NodeSelectorTerm]] = []
    errors: list[str] = []
    for i, term in enumerate(terms):
        weight = int(term.get("weight") or 0)
        preference = term.get("preference") or {}
        if weight == 0 or is_empty_term(preference):
            continue
        compiled, errs = parse_node_selector_term(preference, f"{path}[{i}].preference")
        if compiled is None:
            errors.extend(errs)
        else:
            parsed.append((weight, compiled))
    return tuple(parsed), errors
