"""The VPA recommender: usage → decaying histograms → ``status.recommendation``, every minute.

Upstream: kubernetes/autoscaler ``vertical-pod-autoscaler/pkg/recommender``
(``routines/recommender.go`` RunOnce: load VPAs and pods, feed the latest
metrics.k8s.io samples into the model, recompute every VPA's recommendation,
write it with the ``RecommendationProvided`` / ``NoPodsMatched`` conditions;
``input/oom`` turns OOMKilled containers into artificial memory samples).
kemu runs it as a controller on the cluster clock: one work-queue key that
requeues itself every ``recommender_interval`` (60 s) of cluster time. Pods are
matched to a VPA by its target's selector and the pod's chain of controllers
(:func:`emulator.api.vpa.controlled_by_target`); usage comes from the same
snapshot the API server serves as ``metrics.k8s.io``. The model
(:mod:`.model`) and the estimators (:mod:`.estimator`) are plain numpy code the
tests drive directly through :meth:`VPARecommender.run_once`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
from prometheus_client import Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric

from emulator.api import errors, vpa
from emulator.api.kinds import VERTICALPODAUTOSCALER, by_api_version_kind
from emulator.api.quantity import cpu_millis, to_int
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.collectors import SourceCollector, registered
from emulator.controllers.runtime import ControllerContext
from emulator.controllers.vpa.estimator import Recommendation, recommend_all
from emulator.controllers.vpa.loop import PeriodicVPAController
from emulator.controllers.vpa.model import Samples, UsageModel
from emulator.informers import NAMESPACE_INDEX, ResourceEventHandlerFuncs
from emulator.kubelet import usage

log = logging.getLogger(__name__)


EXECUTION_LATENCY = Histogram("vpa_recommender_execution_latency_seconds",
                              "Time spent in various parts of VPA Recommender main loop.", ["step"])
OBJECTS = Gauge("vpa_recommender_vpa_objects_count", "Number of VPA objects present in the cluster.",
                ["update_mode", "has_recommendation"])
# kube-state-metrics' VPA family (the custom-resource-state config it ships for VPAs), exported at scrape time.
_KSM_LABELS = ["namespace", "verticalpodautoscaler", "target_api_version", "target_kind", "target_name",
               "container", "resource", "unit"]
_KSM_FIELDS = (("target", "target"), ("lowerBound", "lowerbound"), ("upperBound", "upperbound"),
               ("uncappedTarget", "uncappedtarget"))
# kemu's own: what the matched pods request now, beside the recommendation (a dashboard's "target vs requests"
# without kube-state-metrics' per-pod kube_pod_container_resource_requests, one series per container of a VPA).
REQUESTS_SERIES = "kemu_verticalpodautoscaler_container_resource_requests"
_REQUEST_LABELS = ["namespace", "verticalpodautoscaler", "container", "resource", "unit"]


def _selector_of(target: Mapping[str, Any] | None) -> LabelSelector | None:
    sel = ((target or {}).get("spec") or {}).get("selector")
    return LabelSelector.from_dict(sel) if sel else None


class VPARecommender(PeriodicVPAController):
    """See the module docstring."""

    def __init__(self, ctx: ControllerContext, *, interval: float | None = None) -> None:
        super().__init__("vpa-recommender", ctx, interval_option="recommender_interval", interval=interval)
        self.model = UsageModel()
        self._lock = threading.Lock()
        self._ooms: list[tuple[str, str, float, float]] = []  # (pod uid, container, finished at, memory request)
        self._gone: list[str] = []  # pod uids deleted since the last pass
        self.pods.add_event_handler(ResourceEventHandlerFuncs(update=self._on_pod_update, delete=self._on_pod_delete))
        self.passes = 0
        self.requests: dict[tuple[str, str, str, str], float] = {}  # (ns, vpa, container, resource) -> mean

    def start(self) -> VPARecommender:
        state_collector().add(self)
        super().start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        state_collector().remove(self)
        super().stop(timeout)

    # ------------------------------------------------------------------ pod events
    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        """``input/oom``: a container whose last termination is a newer OOMKilled is an OOM sample."""
        before = {c.get("name"): ((c.get("lastState") or {}).get("terminated") or {}).get("finishedAt")
                  for c in (old.get("status") or {}).get("containerStatuses") or []}
        for cs in (new.get("status") or {}).get("containerStatuses") or []:
            term = (cs.get("lastState") or {}).get("terminated") or {}
            if term.get("reason") != "OOMKilled" or not term.get("finishedAt"):
                continue
            if before.get(cs.get("name")) == term["finishedAt"]:
                continue
            request = 0.0
            for ctr in (new.get("spec") or {}).get("containers") or []:
                if ctr.get("name") == cs.get("name"):
                    mem = ((ctr.get("resources") or {}).get("requests") or {}).get("memory")
                    request = float(to_int(mem)) if mem is not None else 0.0
            with self._lock:
                self._ooms.append((new["metadata"]["uid"], cs.get("name") or "", parse_rfc3339(term["finishedAt"]),
                                   request))

    def _on_pod_delete(self, obj: Any) -> None:
        uid = ((getattr(obj, "obj", obj) or {}).get("metadata") or {}).get("uid")
        if uid:
            with self._lock:
                self._gone.append(uid)

    # ------------------------------------------------------------------ the pass
    def _by_controller(self, namespace: str) -> dict[tuple[str, str], list[Obj]]:
        """The namespace's pods grouped by their controller's (kind, name), once per pass."""
        groups = self._groups.get(namespace)
        if groups is None:
            groups = {}
            for p in self.pods.indexer.by_index(NAMESPACE_INDEX, namespace):
                for ref in p["metadata"].get("ownerReferences") or ():
                    if ref.get("controller"):
                        groups.setdefault((ref.get("kind") or "", ref.get("name") or ""), []).append(p)
                        break
            self._groups[namespace] = groups
        return groups

    def match(self, vpas: list[Obj]) -> dict[str, list[Obj] | None]:
        """VPA key -> the pods it controls (None: its target is missing), from fresh reads of the targets."""
        self.forget_reads()
        self._groups: dict[str, dict[tuple[str, str], list[Obj]]] = {}
        return {self._key(obj): self._matched_pods(obj) for obj in vpas}

    def _matched_pods(self, obj: Obj) -> list[Obj] | None:
        """The pods ``obj`` (a VPA) controls; None when its target does not exist or has no selector."""
        api_version, kind_name, name = vpa.target_ref(obj)
        namespace = obj["metadata"].get("namespace") or ""
        try:
            kind = by_api_version_kind(api_version, kind_name)
        except errors.StatusError:
            return None
        selector = _selector_of(self.get(kind, namespace, name))
        if selector is None:
            return None
        groups = self._by_controller(namespace)
        if kind_name == "Deployment":  # its pods are the pods of its ReplicaSets
            owned = [rs["metadata"]["name"] for rs in self.replicasets.indexer.by_index(NAMESPACE_INDEX, namespace)
                     if any(r.get("controller") and r.get("kind") == "Deployment" and r.get("name") == name
                            for r in rs["metadata"].get("ownerReferences") or ())]
            candidates = [p for rs in owned for p in groups.get(("ReplicaSet", rs), ())]
        else:
            candidates = list(groups.get((kind_name, name), ()))
        return [p for p in candidates if selector.matches(p["metadata"].get("labels"))]

    def run_once(self) -> int:
        """One recommender pass; returns how many VPA statuses it wrote."""
        started = time.perf_counter()
        now = self.clock.now()
        vpas = self.vpas.indexer.list()
        with self._lock:
            ooms, self._ooms = self._ooms, []
            gone, self._gone = set(self._gone), []
        if gone:
            for container in [c for c in self.model.containers() if c[0] in gone]:
                self.model.drop_container(container)
        live = {f"{o['metadata'].get('namespace')}/{o['metadata']['name']}" for o in vpas}
        for key in {k for k, _ in self.model._rows} - live:
            self.model.drop_vpa(key)
        matched = self.match(vpas)
        self.requests = mean_requests(vpas, matched)
        self._feed(vpas, matched, ooms, now)
        t_model = time.perf_counter()
        self.model.expire(now)
        recs = recommend_all(self.model, {k: self.model.rows_of(k) for k in self.model.vpa_keys()})
        changed = [new for obj in vpas
                   if (new := self._with_status(obj, matched[self._key(obj)], recs.get(self._key(obj), {}), now))
                   is not None]
        # One pipelined write for every changed status (each a CAS on the informer's copy, retried on conflict).
        results = self.core.update_status_many(VERTICALPODAUTOSCALER, changed) if changed else []
        written = sum(1 for r in results if not isinstance(r, errors.StatusError))
        counts: dict[tuple[str, str], int] = {}
        for obj in self.vpas.indexer.list():
            has = bool(((obj.get("status") or {}).get("recommendation") or {}).get("containerRecommendations"))
            k = (vpa.update_mode(obj), str(has).lower())
            counts[k] = counts.get(k, 0) + 1
        OBJECTS.clear()
        for (mode, has), n in counts.items():
            OBJECTS.labels(mode, has).set(n)
        EXECUTION_LATENCY.labels("UpdateVPAs").observe(time.perf_counter() - t_model)
        EXECUTION_LATENCY.labels("total").observe(time.perf_counter() - started)
        self.passes += 1
        return written

    @staticmethod
    def _key(obj: Mapping[str, Any]) -> str:
        return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"

    def _feed(self, vpas: list[Obj], matched: dict[str, list[Obj] | None],
              ooms: list[tuple[str, str, float, float]], now: float) -> None:
        """Add the latest usage sample of every matched container, then the OOM samples."""
        namespaces = {o["metadata"].get("namespace") or "" for o in vpas}
        store = self.core.store
        entries = usage.pod_usage_entries(store.redis, store.config.prefix, namespaces, now=now)
        slots: list[int] = []
        times: list[float] = []
        cpu: list[float] = []
        memory: list[float] = []
        requests: list[float] = []
        for obj in vpas:
            key = self._key(obj)
            for pod in matched[key] or []:
                meta = pod["metadata"]
                entry = entries.get((meta.get("namespace") or "", meta["name"]))
                if entry is None:
                    continue
                timestamp, window, containers = entry
                req = {c.get("name"): ((c.get("resources") or {}).get("requests") or {}).get("cpu")
                       for c in (pod.get("spec") or {}).get("containers") or []}
                for name, nanocores, mem in containers:
                    if vpa.is_off(vpa.container_policy(obj, name)):
                        continue
                    slots.append(self.model.slot((meta["uid"], name), self.model.row((key, name))))
                    times.append(timestamp - window)  # a sample is keyed by its interval's start
                    cpu.append(nanocores / 1e9)
                    memory.append(float(mem))
                    r = req.get(name)
                    requests.append(cpu_millis(r) / 1000.0 if r is not None else 0.0)
        self.model.add_samples(Samples(np.array(slots, dtype=np.int64), np.array(times), np.array(cpu),
                                       np.array(memory), np.array(requests)))
        for uid, name, at, request in ooms:
            self.model.record_oom((uid, name), at, request)

    def _with_status(self, obj: Obj, pods: list[Obj] | None, recs: Mapping[str, Recommendation],
                     now: float) -> Obj | None:
        """``obj`` with its new recommendation and conditions, or None when they did not change."""
        status = dict(obj.get("status") or {})
        entries = []
        for name, rec in sorted(recs.items()):
            policy = vpa.container_policy(obj, name)
            if vpa.is_off(policy):
                continue
            uncapped = {r: v for r, v in rec.target.items() if r in vpa.controlled_resources(policy)}
            entry = {"containerName": name}
            for field, values in (("target", rec.target), ("lowerBound", rec.lower), ("upperBound", rec.upper)):
                entry[field] = {r: vpa.quantity(r, v) for r, v in vpa.cap_to_policy(values, policy).items()}
            entry["uncappedTarget"] = {r: vpa.quantity(r, v) for r, v in uncapped.items()}
            entries.append(entry)
        if entries:
            status["recommendation"] = {"containerRecommendations": entries}
        conditions = [c for c in status.get("conditions") or [] if c.get("type") not in
                      ("RecommendationProvided", "NoPodsMatched")]
        if entries:
            conditions.append(self._condition(obj, "RecommendationProvided", "True", now))
        if not pods:
            conditions.append(self._condition(obj, "NoPodsMatched", "True", now, reason="NoPodsMatched",
                                              message="No pods match this VPA object"))
        status["conditions"] = conditions
        if status == (obj.get("status") or {}):
            return None
        return {**obj, "status": status}

    @staticmethod
    def _condition(obj: Obj, type_: str, status: str, now: float, *, reason: str = "", message: str = "") -> Obj:
        for c in (obj.get("status") or {}).get("conditions") or []:
            if c.get("type") == type_ and c.get("status") == status:
                return c  # unchanged: keep its transition time
        cond = {"type": type_, "status": status, "lastTransitionTime": rfc3339(now)}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        return cond

    def state_series(self) -> list[tuple[str, list[str], float]]:
        """kube-state-metrics' VPA recommendation series from the VPA cache: (field, label values, value)."""
        out = []
        for obj in self.vpas.indexer.list():
            meta = obj["metadata"]
            api_version, kind, name = vpa.target_ref(obj)
            recs = ((obj.get("status") or {}).get("recommendation") or {}).get("containerRecommendations") or []
            for entry in recs:
                for field, suffix in _KSM_FIELDS:
                    for resource, value in (entry.get(field) or {}).items():
                        number = cpu_millis(value) / 1000.0 if resource == "cpu" else float(to_int(value))
                        out.append((suffix, [meta.get("namespace") or "", meta["name"], api_version, kind, name,
                                             entry.get("containerName") or "", resource,
                                             "core" if resource == "cpu" else "byte"], number))
        return out


def mean_requests(vpas: list[Obj], matched: Mapping[str, list[Obj] | None]) -> dict[tuple[str, str, str, str], float]:
    """(namespace, VPA, container, resource) -> the mean request (cores, bytes) of the VPA's matched pods."""
    sums: dict[tuple[str, str, str, str], list[float]] = {}
    for obj in vpas:
        meta = obj["metadata"]
        for pod in matched.get(f"{meta.get('namespace')}/{meta['name']}") or []:
            for ctr in (pod.get("spec") or {}).get("containers") or []:
                for resource, value in (((ctr.get("resources") or {}).get("requests")) or {}).items():
                    if resource not in ("cpu", "memory"):
                        continue
                    number = cpu_millis(value) / 1000.0 if resource == "cpu" else float(to_int(value))
                    acc = sums.setdefault((meta.get("namespace") or "", meta["name"], ctr.get("name") or "",
                                           resource), [0.0, 0.0])
                    acc[0] += number
                    acc[1] += 1
    return {key: total / n for key, (total, n) in sums.items()}


class VPAStateCollector(SourceCollector):
    """Exports :meth:`VPARecommender.state_series` at scrape time (nothing on the recommender's path)."""

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        families = {suffix: GaugeMetricFamily(
            f"kube_verticalpodautoscaler_status_recommendation_containerrecommendations_{suffix}",
            f"Recommended {suffix} for the container in the VerticalPodAutoscaler.", labels=_KSM_LABELS)
            for _field, suffix in _KSM_FIELDS}
        requests = GaugeMetricFamily(REQUESTS_SERIES, "Mean request of the container over the pods the "
                                     "VerticalPodAutoscaler controls, at the recommender's last pass.",
                                     labels=_REQUEST_LABELS)
        for source in self.sources():
            for suffix, labels, value in source.state_series():
                families[suffix].add_metric(labels, value)
            for (ns, name, container, resource), value in dict(source.requests).items():
                requests.add_metric([ns, name, container, resource, "core" if resource == "cpu" else "byte"], value)
            break  # one leading recommender per process is enough; a second would double the series
        yield from families.values()
        yield requests


def state_collector() -> VPAStateCollector:
    """The process's VPA state collector, registered in the default registry on first use."""
    return registered(VPAStateCollector)


def new_controller(ctx: ControllerContext) -> VPARecommender:
    """The controller manager's constructor for this controller."""
    return VPARecommender(ctx)
