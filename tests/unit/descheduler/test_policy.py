"""DeschedulerPolicy loading: v1alpha2 defaults, and every mistake named by its field."""

from __future__ import annotations

import pytest

from emulator.descheduler.api import PolicyError, load_policy
from tests.unit.descheduler.helpers import policy, profile


def test_defaults_add_the_default_evictor_and_default_args() -> None:
    p = load_policy(policy({"name": "p", "plugins": {"deschedule": {"enabled": ["RemovePodsViolatingNodeTaints"]}}}))
    prof = p.profiles[0]
    assert prof.plugins["filter"] == ("DefaultEvictor",) and prof.plugins["preEvictionFilter"] == ("DefaultEvictor",)
    evictor = prof.args_of("DefaultEvictor")
    assert (evictor.evict_system_critical_pods, evictor.evict_local_storage_pods, evictor.node_fit,
            evictor.min_replicas) == (False, False, False, 0)
    assert prof.args_of("RemovePodsViolatingNodeTaints").include_prefer_no_schedule is False
    assert (p.max_pods_per_node, p.max_pods_per_namespace, p.max_pods_total) == (None, None, None)


def test_yaml_text_with_limits_and_disabled_plugins() -> None:
    p = load_policy("""
apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
maxNoOfPodsToEvictPerNode: 2
maxNoOfPodsToEvictPerNamespace: 3
maxNoOfPodsToEvictTotal: 4
nodeSelector: "pool=a"
profiles:
- name: one
  pluginConfig:
  - name: DefaultEvictor
    args: {minPodAge: 1h30m, priorityThreshold: {value: 1000}}
  plugins:
    balance: {enabled: [RemoveDuplicates, RemovePodsViolatingTopologySpreadConstraint],
              disabled: [RemovePodsViolatingTopologySpreadConstraint]}
""")
    assert (p.max_pods_per_node, p.max_pods_per_namespace, p.max_pods_total) == (2, 3, 4)
    assert p.node_selector is not None and p.node_selector.matches({"pool": "a"})
    assert p.profiles[0].plugins["balance"] == ("RemoveDuplicates",)
    args = p.profiles[0].args_of("DefaultEvictor")
    assert args.min_pod_age == 5400.0 and args.priority_threshold.value == 1000


LNU = "LowNodeUtilization"


@pytest.mark.parametrize(("body", "field", "text"), [
    (policy(profile("balance", LNU, {"thresholds": {"cpu": 120}, "targetThresholds": {"cpu": 50}})),
     "profiles[0].pluginConfig[0].args.thresholds.cpu", "cpu threshold not in [0, 100] range"),
    (policy(profile("balance", LNU, {"thresholds": {"cpu": 60}, "targetThresholds": {"cpu": 50}})),
     "profiles[0].pluginConfig[0].args.thresholds.cpu", "percentage is greater than targetThresholds'"),
    (policy(profile("balance", LNU, {"thresholds": {"cpu": 20}, "targetThresholds": {"memory": 50}})),
     "profiles[0].pluginConfig[0].args.targetThresholds", "configured different resources"),
    (policy(profile("balance", LNU, {"thresholds": {}, "targetThresholds": {}})),
     "profiles[0].pluginConfig[0].args.thresholds", "no resource threshold is configured"),
    (policy(profile("balance", LNU, {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50},
                                     "evictableNamespaces": {"include": ["a"]}})),
     "profiles[0].pluginConfig[0].args.evictableNamespaces.include", "only Exclude namespaces"),
    (policy(profile("balance", LNU, {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50},
                                     "metricsUtilization": {"source": "Prometheus"}})),
     "profiles[0].pluginConfig[0].args.metricsUtilization.source", "metrics.k8s.io only"),
    (policy(profile("deschedule", "Nope")), "profiles[0].plugins.deschedule.enabled[0]", "does not exist"),
    (policy(profile("deschedule", LNU)), "profiles[0].plugins.deschedule.enabled[0]",
     "does not implement the deschedule extension point"),
    (policy(profile("deschedule", "RemovePodsViolatingNodeTaints", evictor={"priorityThreshold": {
        "name": "high", "value": 10}})), "profiles[0].pluginConfig[0].args.priorityThreshold", "only one of"),
    (policy(profile("deschedule", "RemovePodsViolatingNodeTaints", evictor={"nodeFitt": True})),
     "profiles[0].pluginConfig[0].args.nodeFitt", "unknown field"),
    (policy(profile("deschedule", "RemovePodsViolatingNodeTaints", evictor={"minPodAge": "soon"})),
     "profiles[0].pluginConfig[0].args.minPodAge", "must be a duration"),
    (policy(profile("deschedule", "RemovePodsViolatingNodeTaints",
                    {"excludedTaints": ["a"], "includedTaints": ["b"]})),
     "profiles[0].pluginConfig[0].args", "not both"),
    (policy(profile("deschedule", "RemovePodsHavingTooManyRestarts", {"podRestartThreshold": 0})),
     "profiles[0].pluginConfig[0].args.podRestartThreshold", "threshold"),
    (policy(profile("deschedule", "PodLifeTime", {"states": ["Running"]})),
     "profiles[0].pluginConfig[0].args.maxPodLifeTimeSeconds", "not set"),
    (policy(profile("deschedule", "RemovePodsViolatingNodeTaints",
                    {"namespaces": {"include": ["a"], "exclude": ["b"]}})),
     "profiles[0].pluginConfig[0].args.namespaces", "only one of Include/Exclude"),
    (policy(profile("deschedule", "RemovePodsViolatingNodeTaints", evictor={"labelSelector": {
        "matchExpressions": [{"key": "a", "operator": "Bad"}]}})),
     "profiles[0].pluginConfig[0].args.labelSelector.matchExpressions[0].operator", "operator"),
    (policy({"name": "a"}, {"name": "a"}), "profiles[1].name", "unique"),
    (policy({"plugins": {}}), "profiles[0].name", "required"),
    ({**policy(), "apiVersion": "descheduler/v1alpha1"}, "apiVersion", "v1alpha2"),
    (policy(maxNoOfPodsToEvictPerNode=-1), "maxNoOfPodsToEvictPerNode", "greater than or equal to 0"),
], ids=["threshold-range", "threshold-above-target", "different-resources", "no-thresholds", "include-namespaces",
        "prometheus", "unknown-plugin", "wrong-extension-point", "priority-threshold-both", "unknown-arg",
        "bad-duration", "included-and-excluded-taints", "restart-threshold", "lifetime-required",
        "include-and-exclude", "bad-selector", "duplicate-profile", "profile-name-required", "old-api-version",
        "negative-limit"])
def test_mistakes_name_the_field(body: dict, field: str, text: str) -> None:
    with pytest.raises(PolicyError) as info:
        load_policy(body)
    assert info.value.field == field
    assert text in str(info.value)
    assert str(info.value).startswith(field)
