"""KubeSchedulerConfiguration loading: defaults merged as upstream merges them, and errors naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from emulator.scheduler import in_tree_registry
from emulator.scheduler.config import (
    SchedulerConfigError,
    build_frameworks,
    default_configuration,
    load_configuration,
    parse_configuration,
)
from emulator.scheduler.framework.profile import default_plugins

REGISTRY = in_tree_registry()


def _frameworks(doc: dict[str, Any]) -> dict[str, Any]:
    return build_frameworks(parse_configuration(doc, validate_registry=REGISTRY), REGISTRY)


def _names(fw: Any, point: str) -> list[str]:
    return [p.name for p in fw.plugins_at(point)]


def test_empty_file_is_the_default_profile():
    config = default_configuration(list(REGISTRY))
    assert config.scheduler_names == ["default-scheduler"]
    assert config.parallelism == 16 and config.percentage_of_nodes_to_score == 0
    enabled = [ref.name for ref in config.profiles[0].multi_point.enabled]
    assert enabled == [ref.name for ref in default_plugins() if ref.name in REGISTRY]
    fw = _frameworks({})["default-scheduler"]
    assert fw.score_weights["TaintToleration"] == 3 and fw.score_weights["NodeResourcesFit"] == 1


def test_score_weight_override_keeps_the_default_plugin_in_place():
    fw = _frameworks({"profiles": [{"plugins": {"multiPoint": {"enabled": [
        {"name": "NodeResourcesFit", "weight": 7}]}}}]})["default-scheduler"]
    assert fw.score_weights["NodeResourcesFit"] == 7
    filters = _names(fw, "filter")
    assert filters.index("NodeResourcesFit") > filters.index("NodeAffinity")  # its default position


def test_per_point_disable_removes_a_multipoint_plugin_there_only():
    fw = _frameworks({"profiles": [{"plugins": {"score": {"disabled": [{"name": "ImageLocality"},
                                                                       {"name": "TaintToleration"}]}}}]})
    fw = fw["default-scheduler"]
    scored = _names(fw, "score")
    assert "ImageLocality" not in scored and "TaintToleration" not in scored and "NodeResourcesFit" in scored
    assert "TaintToleration" in _names(fw, "filter")


def test_disable_all_and_enable_a_few():
    fw = _frameworks({"profiles": [{"plugins": {
        "multiPoint": {"disabled": [{"name": "*"}], "enabled": [{"name": "PrioritySort"},
                                                                {"name": "NodeResourcesFit", "weight": 2}]}}}]})
    fw = fw["default-scheduler"]
    assert _names(fw, "filter") == ["NodeResourcesFit"] and fw.score_weights == {"NodeResourcesFit": 2}


def test_plugin_args_reach_the_plugin():
    doc = {"profiles": [{"schedulerName": "bin-packing", "pluginConfig": [
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated", "resources": [
            {"name": "cpu", "weight": 1}]}}}]}]}
    plugin = _frameworks(doc)["bin-packing"].plugins["NodeResourcesFit"]
    assert plugin.scorer.name == "MostAllocated" and [r.name for r in plugin.resources] == ["cpu"]
    default = _frameworks({})["default-scheduler"].plugins["NodeResourcesFit"]
    assert default.scorer.name == "LeastAllocated"


def test_several_profiles_and_percentages():
    config = parse_configuration({"percentageOfNodesToScore": 30, "parallelism": 4, "profiles": [
        {"schedulerName": "a"}, {"schedulerName": "b", "percentageOfNodesToScore": 70}]},
        validate_registry=REGISTRY)
    fws = build_frameworks(config, REGISTRY)
    assert config.scheduler_names == ["a", "b"] and config.parallelism == 4
    assert fws["a"].percentage() == 30 and fws["b"].percentage() == 70


def test_load_from_file(tmp_path: Path):
    path = tmp_path / "sched.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    "podInitialBackoffSeconds: 2\npodMaxBackoffSeconds: 20\n"
                    "profiles:\n- schedulerName: my-scheduler\n")
    config = load_configuration(path, validate_registry=REGISTRY)
    assert config.scheduler_names == ["my-scheduler"]
    assert (config.pod_initial_backoff_seconds, config.pod_max_backoff_seconds) == (2.0, 20.0)


@pytest.mark.parametrize(("doc", "error"), [
    ({"apiVersion": "kubescheduler.config.k8s.io/v1beta3"},
     'apiVersion: Invalid value: "kubescheduler.config.k8s.io/v1beta3": only kubescheduler.config.k8s.io/v1 is '
     "supported"),
    ({"kind": "Pod"}, 'kind: Invalid value: "Pod": must be KubeSchedulerConfiguration'),
    ({"parallelism": 0}, "parallelism: Invalid value: 0: should be an integer value greater than zero"),
    ({"percentageOfNodesToScore": 101}, "percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]"),
    ({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 1},
     "podMaxBackoffSeconds: Invalid value: 1.0: must be greater than or equal to PodInitialBackoffSeconds"),
    ({"profiles": []}, "profiles: Required value"),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]},
     'profiles[1].schedulerName: Duplicate value: "a"'),
    ({"profiles": [{"schedulerName": ""}]}, "profiles[0].schedulerName: Required value"),
    ({"profiles": [{"percentageOfNodesToScore": -1}]},
     "profiles[0].percentageOfNodesToScore: Invalid value: -1: not in valid range [0-100]"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}}}]},
     'profiles[0].plugins.score.enabled[0].name: Invalid value: "NoSuchPlugin": plugin NoSuchPlugin does not '
     "exist in the registry"),
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "ImageLocality", "weight": -2}]}}}]},
     "profiles[0].plugins.score.enabled[0].weight: Invalid value: -2: must be a non-negative integer"),
    ({"profiles": [{"plugins": {"scroe": {}}}]}, 'profiles[0].plugins: unknown field "scroe"'),
    ({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit"}, {"name": "NodeResourcesFit"}]}]},
     'profiles[0].pluginConfig[1]: Duplicate value: "NodeResourcesFit"'),
    ({"profiles": [{"pluginConfig": [{"name": "ImageLocality"}, {"name": "NodeResourcesFit", "args": {
        "scoringStrategy": {"type": "Bogus"}}}]}]},
     'profiles[0].pluginConfig[1].args: Invalid value: "NodeResourcesFit": scoring strategy Bogus is not supported'),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "b", "plugins": {"queueSort": {
        "disabled": [{"name": "*"}]}}}]},
     'profiles[1].plugins.queueSort: Invalid value: "none": queueSort must be the same for all profiles'),
    ({"leaderElect": True}, 'unknown field "leaderElect"'),
])
def test_errors_name_the_field(doc, error):
    with pytest.raises(SchedulerConfigError) as e:
        parse_configuration(doc, validate_registry=REGISTRY)
    assert error in e.value.errors[0] if len(e.value.errors) == 1 else any(error in x for x in e.value.errors)
    assert error in str(e.value)


def test_all_errors_are_reported_at_once():
    with pytest.raises(SchedulerConfigError) as e:
        parse_configuration({"parallelism": -1, "percentageOfNodesToScore": 200, "foo": 1})
    assert len(e.value.errors) == 3 and str(e.value).startswith("[")


def test_accepted_no_op_fields():
    config = parse_configuration({"leaderElection": {"leaderElect": False}, "clientConnection": {"qps": 50},
                                  "extenders": [{"urlPrefix": "http://127.0.0.1:1/", "filterVerb": "filter"}]})
    assert config.extenders == [{"urlPrefix": "http://127.0.0.1:1/", "filterVerb": "filter"}]


def test_unreadable_and_invalid_files(tmp_path: Path):
    with pytest.raises(SchedulerConfigError, match="cannot read scheduler configuration"):
        load_configuration(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [\n")
    with pytest.raises(SchedulerConfigError, match="not valid YAML"):
        load_configuration(bad)


def test_custom_plugins_resolve_by_import_path_without_touching_the_registry():
    spec = "emulator.scheduler.plugins.examples.gpu_binpack:new"
    doc = {"profiles": [{"plugins": {"score": {"enabled": [{"name": spec, "weight": 3}]}}}]}
    frameworks = _frameworks(doc)
    assert frameworks["default-scheduler"].score_weights[spec] == 3
    assert spec not in REGISTRY  # resolved into a copy
    with pytest.raises(SchedulerConfigError) as e:
        parse_configuration({"profiles": [{"plugins": {"score": {"enabled": [{"name": "no_such_mod:X"}]}}}]},
                            validate_registry=REGISTRY)
    assert e.value.errors[0].startswith(
        'profiles[0].plugins.score.enabled[0].name: Invalid value: "no_such_mod:X": plugin no_such_mod:X cannot be')


def test_extenders_are_validated_and_need_a_transport_to_build():
    with pytest.raises(SchedulerConfigError) as e:
        parse_configuration({"extenders": [{"urlPrefix": "http://x", "prioritizeVerb": "p", "filterverb": "f"},
                                           {"filterVerb": "f", "httpTimeout": "soon"}]})
    assert e.value.errors == [
        'extenders[0]: unknown field "filterverb"', "extenders[1].urlPrefix: Required value",
        'extenders[1].httpTimeout: Invalid value: "soon": time: invalid duration "soon"',
        "extenders[0].weight: Invalid value: 0: must have a positive weight applied to it"]
    config = parse_configuration({"extenders": [{"urlPrefix": "http://x", "filterVerb": "filter"}]},
                                 validate_registry=REGISTRY)
    with pytest.raises(SchedulerConfigError, match="a transport is required"):
        build_frameworks(config, REGISTRY)
    frameworks = build_frameworks(config, REGISTRY, transport=object())  # type: ignore[arg-type]
    assert "Extender(http://x)" in [p.name for p in frameworks["default-scheduler"].plugins_at("filter")]
