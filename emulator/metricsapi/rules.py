"""prometheus-adapter's discovery rules, as data: which series become which custom and external metrics.

kubernetes-sigs/prometheus-adapter serves ``custom.metrics.k8s.io`` and
``external.metrics.k8s.io`` from Prometheus through a config file of rules
(``docs/config.md``, ``pkg/config/config.go``); kemu reads the same schema:

.. code-block:: yaml

    rules:                      # custom metrics (describe Kubernetes objects)
    - seriesQuery: 'http_requests_per_second{namespace!="",pod!=""}'
      seriesFilters: [{isNot: "^go_.*"}]          # optional, on series names
      resources:
        overrides:                                 # label -> group-resource
          namespace: {resource: "namespace"}
          pod: {resource: "pod"}
        template: "kube_<<.Group>>_<<.Resource>>"  # optional: more label -> resource
      name: {matches: "^(.*)$", as: "${1}"}       # series name -> metric name
      metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
    externalRules:              # external metrics (not tied to objects)
    - seriesQuery: 'kemu_loadgen_http_requests_per_second{target!=""}'
      resources: {namespaced: false}
      name: {matches: "^kemu_loadgen_(.*)$", as: "${1}"}
      metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'

The default rules ship as ``emulator/metricsapi/rules.yaml``; the
``metrics_rules`` config key (``--metrics-rules``) names another file.

``metricsQuery`` is a template with ``<<.Series>>``, ``<<.LabelMatchers>>``
and ``<<.GroupBy>>`` (:func:`render`); the result is sent to Prometheus as is
when one is configured, or evaluated over kemu's own series by
:mod:`emulator.metricsapi.series`, which understands the PromQL such rules use:
a selector ``name{label op "value", ...}`` (ops ``=``, ``!=``, ``=~``,
``!~``; regexes anchored, as in Prometheus), optionally inside one of
``sum avg max min count`` with ``by (labels)`` before or after it
(:func:`parse_query`). A rules file that needs more than that is refused
up front when no Prometheus is configured, naming the rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.yamlfile import read_yaml_file

__all__ = ["DEFAULT_RULES", "Matcher", "Query", "Rule", "Rules", "RulesError", "parse_query", "parse_selector",
           "render"]

DEFAULT_RULES = Path(__file__).with_name("rules.yaml")
AGGREGATIONS = ("sum", "avg", "max", "min", "count")


class RulesError(ValueError):
    """A rules file or query kemu cannot use; the message names the rule."""


# -- PromQL subset ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str  # = != =~ !~
    value: str

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.label, "")
        if self.op == "=":
            return have == self.value
        if self.op == "!=":
            return have != self.value
        hit = re.fullmatch(self.value, have) is not None  # Prometheus anchors regex matchers
        return hit if self.op == "=~" else not hit

    def text(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.label}{self.op}"{escaped}"'


@dataclass(frozen=True)
class Query:
    """A parsed query: series matchers (``__name__`` among them), and an optional aggregation by labels."""

    matchers: tuple[Matcher, ...]
    aggregation: str | None = None
    by: tuple[str, ...] = ()


_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')
_NAME = re.compile(r"\s*([A-Za-z_:][A-Za-z0-9_:]*)?\s*")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


def parse_selector(text: str) -> tuple[Matcher, ...]:
    """``name{a="x",b!=""}``, ``{__name__=~"..."}`` or a bare ``name``."""
    name_match = _NAME.match(text)
    assert name_match is not None  # the pattern matches the empty string
    matchers: list[Matcher] = []
    if name_match.group(1):
        matchers.append(Matcher("__name__", "=", name_match.group(1)))
    rest = text[name_match.end():].strip()
    if rest:
        if not (rest.startswith("{") and rest.endswith("}")):
            raise RulesError(f"not a series selector: {text!r}")
        body = rest[1:-1].strip()
        pos = 0
        while pos < len(body):
            m = _MATCHER.match(body, pos)
            if m is None:
                raise RulesError(f"cannot read the label matchers of {text!r} at {body[pos:]!r}")
            matchers.append(Matcher(m.group(1), m.group(2), _unescape(m.group(3))))
            pos = m.end()
            if pos < len(body):
                if body[pos] != ",":
                    raise RulesError(f"expected ',' between label matchers in {text!r}")
                pos += 1
    if not matchers:
        raise RulesError(f"empty series selector: {text!r}")
    return tuple(matchers)


_AGG = re.compile(r"^\s*(" + "|".join(AGGREGATIONS) + r")\s*(?:by\s*\(([^)]*)\)\s*)?\((.*?)\)\s*"
                  r"(?:by\s*\(([^)]*)\))?\s*$", re.S)


def _labels(text: str | None) -> tuple[str, ...]:
    return tuple(label.strip() for label in (text or "").split(",") if label.strip())


def parse_query(text: str) -> Query:
    """The PromQL subset kemu evaluates itself (see the module docstring); :class:`RulesError` otherwise."""
    m = _AGG.match(text)
    if m is None:
        return Query(parse_selector(text.strip()))
    if m.group(2) is not None and m.group(4) is not None:
        raise RulesError(f"'by' given twice in {text!r}")
    inner = m.group(3).strip()
    if re.search(r"[(\[]", re.sub(r'"(?:[^"\\]|\\.)*"', '""', inner)):  # a call or range outside quoted values
        raise RulesError(f"kemu's own series are evaluated without PromQL functions ({text!r}); "
                         "give --prometheus-url to run such queries on a real Prometheus")
    return Query(parse_selector(inner), m.group(1), _labels(m.group(2) or m.group(4)))


def render(template: str, series: str, matchers: list[Matcher], group_by: list[str]) -> str:
    """prometheus-adapter's metricsQuery template: ``<<.Series>>``, ``<<.LabelMatchers>>``, ``<<.GroupBy>>``."""
    out = template.replace("<<.Series>>", series)
    out = out.replace("<<.LabelMatchers>>", ",".join(m.text() for m in matchers))
    out = out.replace("<<.GroupBy>>", ",".join(group_by))
    # An empty matcher list leaves "{}" or "{,x}" behind: both mean the same as without it.
    return out.replace("{,", "{")


# -- rules ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    series_query: str
    metrics_query: str
    matchers: tuple[Matcher, ...]  # the parsed seriesQuery
    overrides: Mapping[str, str]  # label -> resource (plural, group-qualified: pods, deployments.apps)
    template: str | None  # label template with <<.Group>> / <<.Resource>>
    name_matches: str
    name_as: str
    is_filters: tuple[str, ...] = ()
    is_not_filters: tuple[str, ...] = ()
    namespaced: bool = True
    where: str = ""  # "rules[0]": for messages

    def metric_name(self, series: str) -> str | None:
        """The API name of ``series`` under this rule, or None when the rule does not take it."""
        if any(re.search(p, series) is None for p in self.is_filters):
            return None
        if any(re.search(p, series) is not None for p in self.is_not_filters):
            return None
        m = re.search(self.name_matches, series)
        if m is None:
            return None
        # Go's regexp.Expand: $1 / ${1}; $0 the whole match.
        return re.sub(r"\$\{?(\d+)\}?", lambda g: m.group(int(g.group(1))) or "", self.name_as)

    def resource_label(self, resource: str) -> str | None:
        """The series label naming objects of ``resource`` (plural, maybe ``.group``), if the rule maps one."""
        for label, res in self.overrides.items():
            if res == resource:
                return label
        if self.template:
            plural, _, group = resource.partition(".")
            singular = _singular(plural)
            label = self.template.replace("<<.Group>>", group.replace(".", "_")).replace("<<.Resource>>", singular)
            return label
        return None

    def namespace_label(self) -> str | None:
        return self.resource_label("namespaces") if self.namespaced else None

    def resources(self) -> list[str]:
        return sorted(set(self.overrides.values()))


def _singular(plural: str) -> str:
    for suffix, repl in (("sses", "ss"), ("ies", "y"), ("s", "")):
        if plural.endswith(suffix):
            return plural[: -len(suffix)] + repl
    return plural


def _plural(resource: str, group: str) -> str:
    """prometheus-adapter accepts ``pod`` or ``pods``; kemu keys resources by plural (``deployments.apps``)."""
    name = resource.lower()
    if not name.endswith("s"):
        name = name[:-1] + "ies" if name.endswith("y") else name + ("es" if name.endswith("ss") else "s")
    return f"{name}.{group}" if group else name


def _rule(data: Any, where: str, *, external: bool) -> Rule:
    if not isinstance(data, Mapping):
        raise RulesError(f"{where}: a rule is a mapping (seriesQuery, resources, name, metricsQuery)")
    series_query = data.get("seriesQuery")
    metrics_query = data.get("metricsQuery")
    if not isinstance(series_query, str) or not series_query.strip():
        raise RulesError(f"{where}.seriesQuery: required, a Prometheus series selector")
    if not isinstance(metrics_query, str) or not metrics_query.strip():
        raise RulesError(f"{where}.metricsQuery: required, a PromQL template")
    try:
        matchers = parse_selector(series_query)
    except RulesError as e:
        raise RulesError(f"{where}.seriesQuery: {e}") from None
    resources = data.get("resources") or {}
    if not isinstance(resources, Mapping):
        raise RulesError(f"{where}.resources: a mapping (overrides, template, namespaced)")
    overrides: dict[str, str] = {}
    for label, target in (resources.get("overrides") or {}).items():
        if not isinstance(target, Mapping) or not isinstance(target.get("resource"), str):
            raise RulesError(f"{where}.resources.overrides.{label}: expected {{group: ..., resource: ...}}")
        overrides[str(label)] = _plural(target["resource"], str(target.get("group") or ""))
    template = resources.get("template")
    if template is not None and not isinstance(template, str):
        raise RulesError(f"{where}.resources.template: a string such as kube_<<.Group>>_<<.Resource>>")
    name = data.get("name") or {}
    if not isinstance(name, Mapping):
        raise RulesError(f"{where}.name: a mapping (matches, as)")
    matches = str(name.get("matches") or ".*")
    try:
        groups = re.compile(matches).groups
    except re.error as e:
        raise RulesError(f"{where}.name.matches: {e}") from None
    as_ = name.get("as")
    if as_ is None:
        if groups > 1:
            raise RulesError(f"{where}.name.as: required when name.matches has more than one capture group")
        as_ = "$1" if groups == 1 else "$0"
    filters = data.get("seriesFilters") or []
    is_filters = tuple(str(f["is"]) for f in filters if isinstance(f, Mapping) and "is" in f)
    is_not = tuple(str(f["isNot"]) for f in filters if isinstance(f, Mapping) and "isNot" in f)
    namespaced = bool(resources.get("namespaced", True)) and (
        not external or "namespaces" in overrides.values() or template is not None)
    return Rule(series_query, metrics_query, matchers, overrides, template, matches, str(as_), is_filters, is_not,
                namespaced, where)


@dataclass(frozen=True)
class Rules:
    custom: tuple[Rule, ...] = ()
    external: tuple[Rule, ...] = ()
    source: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, data: Any, source: str = "") -> Rules:
        if not isinstance(data, Mapping):
            raise RulesError(f"{source}: a rules file is a mapping with rules and externalRules")
        unknown = set(data) - {"rules", "externalRules", "resourceRules"}
        if unknown:
            raise RulesError(f"{source}: unknown keys {sorted(unknown)} (known: rules, externalRules)")
        custom = tuple(_rule(r, f"{source}: rules[{i}]", external=False) for i, r in enumerate(data.get("rules") or []))
        external = tuple(_rule(r, f"{source}: externalRules[{i}]", external=True)
                         for i, r in enumerate(data.get("externalRules") or []))
        return cls(custom, external, source)

    @classmethod
    def load(cls, path: str | Path | None = None) -> Rules:
        """The rules file at ``path`` (None: kemu's default rules)."""
        path = Path(path) if path is not None else DEFAULT_RULES
        return cls.from_mapping(read_yaml_file(path, "metrics rules file", RulesError), str(path))

    def check_local(self) -> None:
        """Every metricsQuery must be one kemu evaluates itself (no Prometheus configured)."""
        for rule in (*self.custom, *self.external):
            try:
                parse_query(render(rule.metrics_query, "series", [], ["label"]))
            except RulesError as e:
                raise RulesError(f"{rule.where}.metricsQuery: {e}") from None
