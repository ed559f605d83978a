"""Helpers several in-tree plugins share: score normalisation, tolerations, node selector terms, Go arithmetic.

Each helper comes in the two shapes plugins need: a per-node function (the
reference semantics, used by ``filter``/``score``) and an array form over a
snapshot (used by ``filter_all``/``score_all``). Upstream sources:

* ``pkg/scheduler/framework/plugins/helper/normalize_score.go`` (DefaultNormalizeScore)
* ``staging/src/k8s.io/api/core/v1/toleration.go`` (ToleratesTaint) and
  ``pkg/apis/core/v1/helper/helpers.go`` (FindMatchingUntoleratedTaint)
* ``staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go``
  (node selector terms, RequiredNodeAffinity, PreferredSchedulingTerms)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.api.names import label_value_errors, qualified_name_errors
from emulator.scheduler.framework.interface import MAX_NODE_SCORE
from emulator.scheduler.framework.snapshot import Snapshot, Taint

__all__ = [
    "NodeSelectorTerm",
    "RequiredNodeAffinity",
    "default_normalize_score",
    "find_untolerated_taint",
    "go_div",
    "go_int_div",
    "is_empty_term",
    "parse_node_selector_term",
    "taint_of",
    "tolerates",
    "tolerations_tolerate",
]

# -- integer arithmetic as Go does it ---------------------------------------------------------


def go_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Integer division truncating toward zero, as Go's ``/`` on int64 (numpy's ``//`` floors)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if b.ndim == 0 and b > 0 and (a.size == 0 or a.min() >= 0):
        return a // b  # the common case: floor and truncation agree
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) ^ (b < 0), -q, q)


def go_int_div(a: int, b: int) -> int:
    """Go's ``/`` on two ints: the quotient truncated toward zero."""
    quotient = abs(a) // abs(b)
    return quotient if (a < 0) == (b < 0) else -quotient


def default_normalize_score(scores: np.ndarray, reverse: bool = False, max_priority: int = MAX_NODE_SCORE) -> None:
    """Scale ``scores`` in place to 0..max_priority by the highest one (``DefaultNormalizeScore``).

    With ``reverse`` the scale is flipped (highest raw score -> 0). When the
    highest score is 0 every node gets 0, or ``max_priority`` if reversed.
    """
    max_count = int(scores.max()) if len(scores) else 0
    if max_count <= 0:
        if reverse:
            scores[:] = max_priority
        return
    scaled = go_div(max_priority * scores.astype(np.int64), max_count)
    scores[:] = max_priority - scaled if reverse else scaled


# -- taints and tolerations ---------------------------------------------------------------------


def taint_of(taint: Mapping[str, Any]) -> Taint:
    return (taint.get("key") or "", taint.get("value") or "", taint.get("effect") or "")


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """``Toleration.ToleratesTaint``: effect and key match when set; Equal compares values, Exists does not."""
    key, value, effect = taint
    t_effect = toleration.get("effect") or ""
    if t_effect and t_effect != effect:
        return False
    t_key = toleration.get("key") or ""
    if t_key and t_key != key:
        return False
    operator = toleration.get("operator") or ""
    if operator in ("", "Equal"):
        return (toleration.get("value") or "") == value
    return operator == "Exists"


def tolerations_tolerate(tolerations: Iterable[Mapping[str, Any]], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def find_untolerated_taint(taints: Iterable[Taint], tolerations: Sequence[Mapping[str, Any]],
                           effects: frozenset[str]) -> Taint | None:
    """The first taint with an effect in ``effects`` that no toleration tolerates (``FindMatchingUntoleratedTaint``)."""
    for taint in taints:
        if taint[2] in effects and not tolerations_tolerate(tolerations, taint):
            return taint
    return None


# -- node selector terms ------------------------------------------------------------------------

_INT64 = re.compile(r"[+-]?[0-9]+")


def _parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``: sign and ASCII digits only, within int64."""
    if not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


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
        elif _parse_int64(values[0]) is None:
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
    number = _parse_int64(value) if value is not None else None
    if number is None:
        return False
    bound = int(values[0])
    return number > bound if operator == "Gt" else number < bound


def _label_mask(req: LabelRequirement, snapshot: Snapshot) -> np.ndarray:
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
        number = _parse_int64(v)
        return number is not None and (number > bound if operator == "Gt" else number < bound)

    return column.mask(compare, absent=False)


def _field_ok(req: FieldRequirement, node_name: str) -> bool:
    key, operator, value = req
    actual = node_name if key == _NAME_FIELD else ""  # a node's field set has only metadata.name
    return (actual == value) if operator == "In" else (actual != value)


def _field_mask(req: FieldRequirement, snapshot: Snapshot) -> np.ndarray:
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

    def mask(self, snapshot: Snapshot) -> np.ndarray:
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

    def mask(self, snapshot: Snapshot) -> np.ndarray:
        mask = np.ones(snapshot.num_nodes, dtype=bool)
        for key, value in self.node_selector:
            mask &= snapshot.label_column(key).mask(lambda v, want=value: v == want, absent=False)
        if self.terms is not None:
            any_term = np.zeros(snapshot.num_nodes, dtype=bool)
            for term in self.terms:
                any_term |= term.mask(snapshot)
            mask &= any_term
        return mask

