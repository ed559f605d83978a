"""Workload objects with ownerReferences, for the garbage-collector, eviction and disruption tests.

No ReplicaSet or Deployment controller exists yet, so tests build the
Deployment → ReplicaSet → Pod chain by hand, as those controllers would
(controller references with ``blockOwnerDeletion: true``).
"""

from __future__ import annotations

from collections.abc import Callable

from emulator.api import errors
from emulator.api.kinds import DEPLOYMENT, POD, REPLICASET
from emulator.api.types import Obj
from emulator.server.core import ServerCore
from tests import builders as b


def retry_on_conflict(fn: Callable[[], Obj], attempts: int = 16) -> Obj:
    """Run ``fn`` until it does not raise Conflict (client-go ``retry.RetryOnConflict``)."""
    for _ in range(attempts - 1):
        try:
            return fn()
        except errors.StatusError as e:
            if e.reason != "Conflict":
                raise
    return fn()


def owner_ref(owner: Obj, *, controller: bool = True, block: bool = True) -> Obj:
    ref: Obj = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"]}
    if controller:
        ref["controller"] = True
    if block:
        ref["blockOwnerDeletion"] = True
    return ref


def _template(labels: dict[str, str]) -> Obj:
    return {"metadata": {"labels": dict(labels)}, "spec": {"containers": [b.container()]}}


def deployment(name: str, replicas: int, labels: dict[str, str], namespace: str = "default") -> Obj:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)}, "template": _template(labels)}}


def replica_set(name: str, replicas: int, labels: dict[str, str], *, owner: Obj | None = None,
                namespace: str = "default") -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if owner is not None:
        meta["ownerReferences"] = [owner_ref(owner)]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta,
            "spec": {"replicas": replicas, "selector": {"matchLabels": dict(labels)}, "template": _template(labels)}}


def owned_pod(name: str, owners: list[Obj] | None = None, *, labels: dict[str, str] | None = None,
              node: str | None = None, namespace: str = "default", refs: list[Obj] | None = None) -> Obj:
    body = b.pod(name, namespace, labels=labels, node=node)
    chosen = list(refs or []) + [owner_ref(o, controller=i == 0) for i, o in enumerate(owners or [])]
    if chosen:
        body["metadata"]["ownerReferences"] = chosen
    return body


def web_chain(core: ServerCore, replicas: int = 3, *, labels: dict[str, str] | None = None,
              node: str | None = None) -> tuple[Obj, Obj, list[Obj]]:
    """Deployment ``web`` → ReplicaSet ``web-rs`` → ``replicas`` pods ``web-<i>``."""
    labels = labels or {"app": "web"}
    dep = core.create(DEPLOYMENT, deployment("web", replicas, labels))
    rs = core.create(REPLICASET, replica_set("web-rs", replicas, labels, owner=dep))
    pods = [core.create(POD, owned_pod(f"web-{i}", [rs], labels=labels, node=node)) for i in range(replicas)]
    return dep, rs, pods
