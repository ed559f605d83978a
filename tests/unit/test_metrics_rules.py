"""prometheus-adapter rules as kemu reads them: schema, naming, association, templating, the PromQL subset.

Expected values follow prometheus-adapter's docs/config.md: ``name.as`` defaults to ``$1`` with
one capture group and ``$0`` with none; ``<<.LabelMatchers>>`` is the comma-joined matchers,
``<<.GroupBy>>`` the comma-joined labels; regex matchers are anchored as in Prometheus.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.metricsapi.rules import Matcher, Query, Rules, RulesError, parse_query, parse_selector, render


def rules(**rule: object) -> Rules:
    base = {"seriesQuery": "x", "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"}
    return Rules.from_mapping({"rules": [{**base, **rule}]}, "test")


@pytest.mark.parametrize(("name", "series", "metric"), [
    ({"matches": "^(.*)_total$", "as": "${1}_per_second"}, "http_requests_total", "http_requests_per_second"),
    ({"matches": "^(.*)_total$"}, "http_requests_total", "http_requests"),
    ({"matches": "^http_.*"}, "http_requests_total", "http_requests_total"),
    ({}, "anything", "anything"),
    ({"matches": "^(.*)_total$"}, "http_requests_seconds", None),
], ids=["as-template", "one-group-defaults-to-$1", "no-group-defaults-to-$0", "default-matches-all", "no-match"])
def test_naming(name: dict, series: str, metric: str | None) -> None:
    assert rules(name=name).custom[0].metric_name(series) == metric


def test_series_filters() -> None:
    rule = rules(seriesFilters=[{"is": "^http_"}, {"isNot": "_seconds_total$"}]).custom[0]
    assert rule.metric_name("http_requests_total") == "http_requests_total"
    assert rule.metric_name("http_request_duration_seconds_total") is None
    assert rule.metric_name("grpc_requests_total") is None


@pytest.mark.parametrize(("resources", "resource", "label"), [
    ({"overrides": {"pod": {"resource": "pod"}}}, "pods", "pod"),
    ({"overrides": {"microservice": {"group": "apps", "resource": "deployment"}}}, "deployments.apps", "microservice"),
    ({"overrides": {"ns": {"resource": "namespaces"}}}, "namespaces", "ns"),
    ({"template": "kube_<<.Group>>_<<.Resource>>"}, "deployments.apps", "kube_apps_deployment"),
    ({"overrides": {"pod": {"resource": "pod"}}}, "services", None),
], ids=["override-singular", "override-group", "override-plural", "template", "not-associated"])
def test_association(resources: dict, resource: str, label: str | None) -> None:
    assert rules(resources=resources).custom[0].resource_label(resource) == label


@pytest.mark.parametrize(("data", "expected"), [
    ({"rules": [{"metricsQuery": "x"}]}, r"rules\[0\].seriesQuery: required"),
    ({"rules": [{"seriesQuery": "x"}]}, r"rules\[0\].metricsQuery: required"),
    ({"rules": [{"seriesQuery": "x{a}", "metricsQuery": "x"}]}, r"rules\[0\].seriesQuery: cannot read"),
    ({"rules": [{"seriesQuery": "x", "metricsQuery": "x", "name": {"matches": "(a)(b)"}}]},
     r"rules\[0\].name.as: required"),
    ({"rules": [{"seriesQuery": "x", "metricsQuery": "x", "name": {"matches": "("}}]}, r"rules\[0\].name.matches"),
    ({"rules": [{"seriesQuery": "x", "metricsQuery": "x", "resources": {"overrides": {"pod": "pod"}}}]},
     r"overrides.pod: expected"),
    ({"externalRules": [{"seriesQuery": "x", "metricsQuery": 3}]}, r"externalRules\[0\].metricsQuery"),
    ({"rulez": []}, "unknown keys"),
    (["rules"], "a rules file is a mapping"),
], ids=["no-series-query", "no-metrics-query", "bad-selector", "two-groups-no-as", "bad-regex", "bad-override",
        "bad-external", "unknown-key", "not-a-mapping"])
def test_bad_rules_name_the_rule(data: object, expected: str) -> None:
    with pytest.raises(RulesError, match=expected):
        Rules.from_mapping(data, "rules.yaml")


def test_render_fills_the_template() -> None:
    query = render("sum(rate(<<.Series>>{<<.LabelMatchers>>,container!=\"POD\"}[2m])) by (<<.GroupBy>>)",
                   "http_requests_total", [Matcher("pod", "=~", "a|b"), Matcher("namespace", "=", "somens")], ["pod"])
    assert query == 'sum(rate(http_requests_total{pod=~"a|b",namespace="somens",container!="POD"}[2m])) by (pod)'
    assert render("<<.Series>>{<<.LabelMatchers>>,x=\"1\"}", "s", [], []) == 's{x="1"}'


@pytest.mark.parametrize(("text", "query"), [
    ('sum(x{a="1"}) by (pod)', Query((Matcher("__name__", "=", "x"), Matcher("a", "=", "1")), "sum", ("pod",))),
    ('avg by (pod, ns) (x{a=~"(b)|c"})', Query((Matcher("__name__", "=", "x"), Matcher("a", "=~", "(b)|c")), "avg",
                                               ("pod", "ns"))),
    ('x{a!="",b!~"z.*"}', Query((Matcher("__name__", "=", "x"), Matcher("a", "!=", ""), Matcher("b", "!~", "z.*")))),
    ('{__name__=~"^http_.*"}', Query((Matcher("__name__", "=~", "^http_.*"),))),
    ('max(x{a="q\\"uote"})', Query((Matcher("__name__", "=", "x"), Matcher("a", "=", 'q"uote')), "max")),
], ids=["sum-by-after", "by-before", "selector-only", "name-regex", "escaped-quote"])
def test_parse_query(text: str, query: Query) -> None:
    assert parse_query(text) == query


@pytest.mark.parametrize("text", ['sum(rate(x{a="1"}[2m])) by (pod)', "x[5m]", "histogram_quantile(0.9, x)",
                                  'sum by (a) (x) by (b)'],
                         ids=["rate", "range", "function", "by-twice"])
def test_queries_kemu_cannot_evaluate_are_refused(text: str) -> None:
    with pytest.raises(RulesError):
        parse_query(text)


@pytest.mark.parametrize(("matcher", "labels", "hit"), [
    (Matcher("a", "=", "x"), {"a": "x"}, True),
    (Matcher("a", "!=", ""), {}, False),
    (Matcher("a", "=", ""), {}, True),
    (Matcher("a", "=~", "x|y"), {"a": "y"}, True),
    (Matcher("a", "=~", "x"), {"a": "xx"}, False),
    (Matcher("a", "!~", "x.*"), {"a": "xy"}, False),
], ids=["equal", "absent-is-empty", "empty-matches-absent", "alternation", "anchored", "negated-regex"])
def test_matcher_semantics(matcher: Matcher, labels: dict[str, str], hit: bool) -> None:
    assert matcher.matches(labels) is hit


def test_default_rules_are_evaluable_locally() -> None:
    shipped = Rules.load()
    shipped.check_local()
    assert [r.metric_name("http_requests_per_second") for r in shipped.custom] == ["http_requests_per_second"]
    assert [r.metric_name("kemu_loadgen_queue_depth") for r in shipped.external] == ["queue_depth"]
    assert not shipped.external[0].namespaced
    assert parse_selector(shipped.custom[0].series_query)[1:] == (Matcher("namespace", "!=", ""),
                                                                    Matcher("pod", "!=", ""))


def test_rules_needing_prometheus_are_refused_without_one(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n- seriesQuery: 'http_requests_total{pod!=\"\"}'\n"
                    "  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'\n")
    loaded = Rules.load(path)  # fine for a real Prometheus
    with pytest.raises(RulesError, match=r"rules\[0\].metricsQuery: .*--prometheus-url"):
        loaded.check_local()
    with pytest.raises(RulesError, match="cannot read metrics rules file"):
        Rules.load(tmp_path / "missing.yaml")
