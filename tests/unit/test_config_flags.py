"""``kemu up --clock-speed / --prometheus-url / --metrics-rules`` and the same config keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulator.cli import _config, build_parser
from emulator.config import Config, ConfigError
from emulator.metricsapi.rules import DEFAULT_RULES


@pytest.mark.parametrize(("argv", "speed", "url"), [
    (["up"], 1.0, None),
    (["up", "--clock-speed", "10"], 10.0, None),
    (["up", "--clock-speed", "0.5", "--prometheus-url", "http://prom:9090"], 0.5, "http://prom:9090"),
], ids=["default", "ten", "half-with-prometheus"])
def test_flags_reach_the_config(argv: list[str], speed: float, url: str | None) -> None:
    cfg = _config(build_parser().parse_args(argv))
    assert cfg.clock_speed == speed
    assert cfg.prometheus_url == url


def test_config_file_keys_and_flag_precedence(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: []\nexternalRules: []\n")
    path = tmp_path / "kemu.yaml"
    path.write_text(f"clock_speed: 5\nmetrics_rules: {rules}\n")
    cfg = _config(build_parser().parse_args(["up", "--config", str(path)]))
    assert (cfg.clock_speed, cfg.metrics_rules) == (5.0, str(rules))
    assert _config(build_parser().parse_args(["up", "--config", str(path), "--clock-speed", "20"])).clock_speed == 20


@pytest.mark.parametrize(("values", "expected"), [
    ({"clock_speed": 0}, "clock_speed must be positive"),
    ({"prometheus_url": "prom:9090"}, "prometheus_url must be an http"),
    ({"metrics_rules": "/no/such/rules.yaml"}, "metrics_rules: cannot read"),
], ids=["zero-speed", "url-without-scheme", "missing-rules"])
def test_bad_values_are_config_errors(values: dict, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        Config.from_dict(values)


def test_rules_needing_prometheus_need_a_prometheus_url(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n- seriesQuery: 'x_total{pod!=\"\"}'\n"
                     "  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'\n")
    with pytest.raises(ConfigError, match="--prometheus-url"):
        Config.from_dict({"metrics_rules": str(rules)})
    assert Config.from_dict({"metrics_rules": str(rules), "prometheus_url": "http://p:9090"}).metrics_rules

RULES = str(DEFAULT_RULES)


@pytest.mark.parametrize(("values", "options"), [
    ({}, {}),
    ({"metrics_rules": RULES, "prometheus_url": "http://prom:9090"},
     {"metrics_rules": RULES, "prometheus_url": "http://prom:9090"}),
    ({"metrics_rules": RULES, "controller_manager": {"retry_period": 1.0, "options": {"metrics_rules": "own.yaml"}}},
     {"metrics_rules": "own.yaml"}),
], ids=["none", "both", "explicit-option-wins"])
def test_controller_managers_get_the_metrics_settings_as_options(values: dict, options: dict) -> None:
    settings = Config.from_dict(values).manager_settings()
    assert settings["options"] == options
    assert settings.get("retry_period") == values.get("controller_manager", {}).get("retry_period")


GROUPS = [{"name": "web", "max": 3}]


@pytest.mark.parametrize(("values", "controllers", "autoscaler"), [
    ({}, None, None),
    ({"node_groups": GROUPS}, ["*", "cluster-autoscaler"], {}),
    ({"node_groups": GROUPS, "cluster_autoscaler": {"expander": "price"},
      "controller_manager": {"controllers": "*,-cluster-autoscaler"}}, ["*", "-cluster-autoscaler"],
     {"expander": "price"}),
    ({"node_groups": GROUPS, "controller_manager": {"controllers": ["replicaset"]}},
     ["replicaset", "cluster-autoscaler"], {}),
], ids=["no-groups", "groups-add-the-autoscaler", "opted-out", "explicit-list"])
def test_node_groups_give_every_manager_the_cluster_autoscaler(values: dict, controllers: list[str] | None,
                                                               autoscaler: dict | None) -> None:
    # One settings dict for the in-process managers and the Ray-hosted ones (--controllers-on-ray).
    settings = Config.from_dict(values).manager_settings()
    assert settings.get("controllers") == controllers
    assert settings["options"].get("cluster_autoscaler") == autoscaler


@pytest.mark.parametrize(("argv", "options", "error"), [
    ([], {}, None),
    (["--prometheus-url", "http://prom:9090", "--period", "15"],
     {"prometheus_url": "http://prom:9090", "node_annotator_period": 15.0}, None),
    (["--prometheus-url", "prom:9090"], None, "--prometheus-url must be an http:// or https:// URL"),
    (["--period", "0"], None, "--period must be a positive number"),
    (["--policy", "/nonexistent/policy.yaml"], None, "--policy /nonexistent/policy.yaml"),
], ids=["defaults", "prometheus-and-period", "bad-url", "bad-period", "missing-policy"])
def test_node_annotator_flags(argv: list[str], options: dict | None, error: str | None) -> None:
    from emulator.annotator_cli import AnnotatorArgsError, manager_config

    args = build_parser().parse_args(["node-annotator", *argv])
    if error is not None:
        with pytest.raises(AnnotatorArgsError, match=error):
            manager_config(args)
        return
    config = manager_config(args)
    assert config.controllers == ("node-annotator",) and dict(config.options) == options
