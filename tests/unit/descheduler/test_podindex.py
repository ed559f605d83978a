"""The descheduler's PodIndex kept across passes equals one built from scratch, whatever changed in between."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from emulator.api.labels import LabelSelector
from emulator.descheduler.framework import ClusterSnapshot
from emulator.descheduler.podindex import PodIndex
from tests.unit.descheduler.helpers import pod

Pods = list[dict]
_rv = iter(range(1000, 10**9))


def _pod(name: str, node: str | None, *, owner: str | None = "rs-a", labels: dict[str, str] | None = None,
         namespace: str = "default", phase: str = "Running", restarts: int = 0, **spec: Any) -> dict:
    body = pod(name, node, owner=owner, labels={"app": owner or "bare", **(labels or {})}, namespace=namespace,
               phase=phase, restarts=restarts, **spec)
    body["metadata"]["uid"] = f"uid-{namespace}-{name}"
    body["metadata"]["resourceVersion"] = str(next(_rv))
    return body


def _start() -> Pods:
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "rs-b"}}}]}}
    return [_pod("a1", "n1"), _pod("a2", "n1"), _pod("a3", "n2"), _pod("b1", "n2", owner="rs-b", affinity=anti),
            _pod("b2", "n3", owner="rs-b", labels={"tier": "web"}), _pod("c1", "n3", namespace="other"),
            _pod("f1", "n3", phase="Failed"), _pod("r1", "n2", owner="rs-c", restarts=3),
            _pod("bare", "n1", owner=None), _pod("pending", None)]


def _changed(pods: Pods, name: str, change: Callable[[dict], None], *, new_version: bool = True) -> Pods:
    """The informer's update: a new object (at a new resourceVersion) replaces the old one."""
    out = []
    for p in pods:
        if p["metadata"]["name"] == name:
            updated = copy.deepcopy(p)
            change(updated)
            if new_version:
                updated["metadata"]["resourceVersion"] = str(next(_rv))
            out.append(updated)
        else:
            out.append(p)
    return out


def _label(key: str, value: str) -> Callable[[dict], None]:
    return lambda p: p["metadata"]["labels"].__setitem__(key, value)


def _second_owner(p: dict) -> None:
    p["metadata"]["ownerReferences"].append({"apiVersion": "v1", "kind": "Service", "name": "svc", "uid": "uid-svc"})


EVENTS: dict[str, Callable[[Pods], Pods]] = {
    "nothing": lambda pods: pods,
    "add to a node": lambda pods: [*pods, _pod("a4", "n2")],
    "add on a new node": lambda pods: [*pods, _pod("a5", "n9")],
    "add before every node (order)": lambda pods: [_pod("z1", "n4"), *pods],
    "delete": lambda pods: [p for p in pods if p["metadata"]["name"] != "a2"],
    "delete a node's last pods": lambda pods: [p for p in pods if p["spec"].get("nodeName") != "n3"],
    "delete the first pod (node order changes)": lambda pods: pods[1:],
    "relabel": lambda pods: _changed(pods, "a3", _label("tier", "web")),
    "relabel to another app": lambda pods: _changed(pods, "a1", _label("app", "rs-b")),
    "change owner": lambda pods: _changed(pods, "a3", lambda p: p["metadata"]["ownerReferences"][0].update(
        name="rs-z", uid="uid-rs-z")),
    "second owner": lambda pods: _changed(pods, "a1", _second_owner),
    "fail": lambda pods: _changed(pods, "a1", lambda p: p["status"].update(phase="Failed")),
    "succeed": lambda pods: _changed(pods, "b1", lambda p: p["status"].update(phase="Succeeded")),
    "move": lambda pods: _changed(pods, "a3", lambda p: p["spec"].update(nodeName="n1")),
    "bind the pending pod": lambda pods: _changed(pods, "pending", lambda p: p["spec"].update(nodeName="n2")),
    "restart": lambda pods: _changed(pods, "a2", lambda p: p["status"]["containerStatuses"][0].update(
        restartCount=1)),
    "no resourceVersion": lambda pods: _changed(pods, "b2", lambda p: p["metadata"].pop("resourceVersion", None),
                                                new_version=False),
    "more requests": lambda pods: _changed(pods, "a2", lambda p: p["spec"]["containers"][0]["resources"].update(
        requests={"cpu": "2", "memory": "1Gi"})),
    "same object, same version": list,
}

SEQUENCES = {
    "one of each": list(EVENTS),
    "churn on one node": ["add to a node", "delete", "relabel", "move", "fail", "nothing", "add to a node"],
    "nodes come and go": ["add on a new node", "delete a node's last pods", "add before every node (order)",
                          "delete the first pod (node order changes)", "bind the pending pod"],
    "owners": ["second owner", "change owner", "relabel to another app", "delete", "add to a node"],
    "unversioned": ["no resourceVersion", "nothing", "relabel", "no resourceVersion", "same object, same version"],
}


def _ids(pods: list[dict]) -> list[int]:
    return [id(p) for p in pods]


def _view(index: PodIndex, per_pass: dict[str, Any]) -> dict[str, Any]:
    """Everything the index answers, with pods by identity (both indexes hold the same objects)."""
    out: dict[str, Any] = {name: ({node: _ids(v) for node, v in per_node.items()} if name != "requested"
                                  else per_node) for name, per_node in per_pass.items()}
    out["owners"] = {first: _ids(index.owner_pods(first)) for first in index.owner_keys()}
    out["labels"] = {key: (_ids(index.label_pods(*key)), index.label_count(*key)) for key in index.label_keys()}
    out["multi"] = _ids(index.multi_owned())
    out["crowded"] = dict(index.crowded_owners())
    return out


@pytest.mark.parametrize("events", list(SEQUENCES.values()), ids=list(SEQUENCES))
def test_index_kept_across_events_equals_one_built_from_scratch(events: list[str]) -> None:
    kept = PodIndex()
    pods = _start()
    kept.update(ClusterSnapshot.build([], pods).pods_by_node)
    for event in events:
        pods = EVENTS[event](pods)
        by_node = ClusterSnapshot.build([], pods).pods_by_node
        scratch = PodIndex()
        assert _view(kept, kept.update(by_node)) == _view(scratch, scratch.update(by_node)), event
        # Read once more after the lists were built and cached: the answers stay the same.
        assert _view(kept, kept.update(by_node)) == _view(scratch, scratch.update(by_node)), event


def test_unchanged_nodes_are_not_indexed_again() -> None:
    index = PodIndex()
    pods = _start()
    index.update(ClusterSnapshot.build([], pods).pods_by_node)
    assert index.changed_nodes == 3
    index.update(ClusterSnapshot.build([], list(pods)).pods_by_node)
    assert index.changed_nodes == 0
    index.update(ClusterSnapshot.build([], EVENTS["relabel"](pods)).pods_by_node)
    assert index.changed_nodes == 1  # a3's node


def test_index_answers_match_a_walk_over_every_pod() -> None:
    pods = EVENTS["second owner"](EVENTS["add on a new node"](_start()))
    snapshot = ClusterSnapshot.build([], pods, index=PodIndex())
    by_node = snapshot.pods_by_node
    running = [p for node in by_node for p in by_node[node] if p["status"]["phase"] not in ("Failed", "Succeeded")]
    owners: dict[str, list[int]] = {}
    for p in running:
        refs = p["metadata"].get("ownerReferences")
        if refs:
            owners.setdefault(refs[0]["uid"], []).append(id(p))
    assert snapshot.by_first_owner().keys() == owners.keys()
    assert {k: _ids(v) for k, v in snapshot.by_first_owner().items()} == owners
    assert _ids(snapshot.multi_owned()) == [id(p) for p in running if len(p["metadata"].get("ownerReferences") or
                                                                          ()) > 1]
    assert set(snapshot.crowded_owners()) == {"uid-rs-a"}  # a1 and a2 on n1
    for ns, selector in (("default", {"matchLabels": {"app": "rs-b"}}), ("default", {"matchLabels": {"tier": "web"}}),
                         ("default", {"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
                         ("other", {"matchLabels": {"app": "rs-a"}}), ("none", {"matchLabels": {"app": "rs-a"}})):
        sel = LabelSelector.from_dict(selector)
        expected = [id(p) for p in running if p["metadata"]["namespace"] == ns and sel.matches(p["metadata"]["labels"])]
        assert _ids(snapshot.select(ns, sel)) == expected, (ns, selector)


@pytest.mark.parametrize("events", list(SEQUENCES.values()), ids=list(SEQUENCES))
def test_selections_kept_across_passes_follow_the_pods(events: list[str]) -> None:
    """``select(..., memo_key=)`` keeps an answer across passes only while its label bucket is unchanged."""
    index = PodIndex()
    selectors = {"rs-b": {"matchLabels": {"app": "rs-b"}}, "web": {"matchLabels": {"tier": "web"}},
                 "any-app": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}
    pods = _start()
    for event in ["nothing", *events]:
        pods = EVENTS[event](pods)
        snapshot = ClusterSnapshot.build([], pods, index=index)
        for ns in ("default", "other"):
            for key, raw in selectors.items():
                sel = LabelSelector.from_dict(raw)
                running = [p for node_pods in snapshot.pods_by_node.values() for p in node_pods
                           if p["status"]["phase"] not in ("Failed", "Succeeded")]
                expected = [id(p) for p in running
                            if p["metadata"]["namespace"] == ns and sel.matches(p["metadata"]["labels"])]
                assert _ids(snapshot.select(ns, sel, memo_key=key)) == expected, (event, ns, key)
