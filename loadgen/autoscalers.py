"""A scenario's autoscalers: the manifests it applies at start, and replicas vs load sampled through the run.

In Kubernetes terms: a scenario's ``objects`` are what ``kubectl apply -f`` would create before the
load starts -- typically Deployments whose pods serve a load target (``kemu.io/load-target``), the
HorizontalPodAutoscalers (``autoscaling/v2``) and VerticalPodAutoscalers (``autoscaling.k8s.io/v1``)
on them. They go through the server core, so defaulting, validation and admission are the API
server's (:mod:`loadgen.scenario` checks their shape when the scenario loads); a refusal names the
object (``objects[2] (HorizontalPodAutoscaler load-0/web): ...``).

While the run goes, :class:`AutoscalerSampler` reads once a (wall) second what ``kubectl get hpa``
and ``kubectl get deploy`` would show -- each HPA's desired and current replicas, its target's
``spec.replicas`` and Ready replicas -- beside the offered load of the target's load target
(:mod:`emulator.loadtargets`), and each VPA's CPU and memory target against the mean request of
its pods. :meth:`AutoscalerSampler.summary` is the summary's ``autoscaling`` section: per HPA and
VPA a few totals and the time series the report plots as "replicas vs load over time".
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping
from typing import Any

from emulator import loadtargets
from emulator.api import errors
from emulator.api.kinds import HORIZONTALPODAUTOSCALER, NAMESPACE, POD, VERTICALPODAUTOSCALER, by_api_version_kind
from emulator.api.quantity import QuantityError, cpu_millis, to_int
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.server.core import ServerCore
from loadgen.sampling import Sampler
from loadgen.scenario import ScenarioError

__all__ = ["AUTOSCALER_KINDS", "AutoscalerSampler", "apply_objects", "summary_lines"]

AUTOSCALER_KINDS = ("HorizontalPodAutoscaler", "VerticalPodAutoscaler")
LOAD_TARGET_ANNOTATION = "kemu.io/load-target"


def apply_objects(core: ServerCore, objects: tuple[Obj, ...]) -> int:
    """Create the objects (their namespaces first); an existing one (an attached cluster's) is kept. Returns
    how many were created."""
    created = 0
    for ns in sorted({(o.get("metadata") or {}).get("namespace", "default") for o in objects
                      if by_api_version_kind(o["apiVersion"], o["kind"]).namespaced}):
        try:
            core.create(NAMESPACE, {"metadata": {"name": ns}})
        except errors.StatusError as e:
            if e.code != 409:
                raise
    for i, obj in enumerate(objects):
        kind = by_api_version_kind(obj["apiVersion"], obj["kind"])
        body = {**obj, "metadata": dict(obj["metadata"])}
        if kind.namespaced:
            body["metadata"].setdefault("namespace", "default")
        try:
            core.create(kind, body)
            created += 1
        except errors.StatusError as e:
            if e.code == 409:
                continue
            name = f"{body['metadata'].get('namespace', '')}/{body['metadata']['name']}".lstrip("/")
            raise ScenarioError(f"objects[{i}] ({kind.kind} {name}): {e.message}") from None
    return created


def _key(obj: Mapping[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"


def _cpu(value: Any) -> float | None:
    try:
        return cpu_millis(value) / 1000.0
    except (QuantityError, TypeError, ValueError):
        return None


def _bytes(value: Any) -> float | None:
    try:
        return float(to_int(value))
    except (QuantityError, TypeError, ValueError):
        return None


def _external_load(spec: Mapping[str, Any], rates: Mapping[str, float], queues: Mapping[str, float]
                   ) -> tuple[str, Mapping[str, float]]:
    """An HPA without a load-target Deployment: the load its first External metric on kemu's own load series
    names (the default rules' ``queue_depth{queue}`` / ``http_requests_per_second{target}``), as
    ("queue NAME" or "target NAME", the table to read it from); ("", {}) when there is none."""
    for metric in spec.get("metrics") or []:
        external = metric.get("external") or {} if metric.get("type") == "External" else {}
        ident = external.get("metric") or {}
        labels = (ident.get("selector") or {}).get("matchLabels") or {}
        if ident.get("name") == "queue_depth" and labels.get("queue"):
            return f"queue {labels['queue']}", queues
        if ident.get("name") == "http_requests_per_second" and labels.get("target"):
            return f"target {labels['target']}", rates
    return "", {}


class AutoscalerSampler(Sampler):
    """Samples every HPA and VPA once per ``interval`` wall seconds on a thread (see the module docstring)."""

    def __init__(self, core: ServerCore, *, interval: float = 1.0) -> None:
        super().__init__(core, interval=interval, name="autoscaler-sampler")
        self.hpas: dict[str, dict[str, Any]] = {}
        self.vpas: dict[str, dict[str, Any]] = {}

    # ---------------------------------------------------------------------------------------- sampling
    def sample(self) -> None:
        store = self.core.store
        rates = loadtargets.rates(store.redis, store.config.prefix)
        queues = loadtargets.queues(store.redis, store.config.prefix)
        wall = round(time.perf_counter() - self.t0, 2)
        cluster = round(self.core.clock.now() - self.cluster_t0, 2)
        for hpa in self.core.list(HORIZONTALPODAUTOSCALER).items:
            self._sample_hpa(hpa, rates, queues, wall, cluster)
        for vpa in self.core.list(VERTICALPODAUTOSCALER).items:
            self._sample_vpa(vpa, wall, cluster)

    def _target(self, namespace: str, ref: Mapping[str, Any]) -> Obj | None:
        try:
            return self.core.get(by_api_version_kind(ref.get("apiVersion") or "", ref.get("kind") or ""),
                                 namespace, ref.get("name") or "")
        except errors.StatusError:
            return None

    def _sample_hpa(self, hpa: Obj, rates: Mapping[str, float], queues: Mapping[str, float], wall: float,
                    cluster: float) -> None:
        spec, status = hpa.get("spec") or {}, hpa.get("status") or {}
        ref = spec.get("scaleTargetRef") or {}
        namespace = hpa["metadata"].get("namespace") or ""
        target = self._target(namespace, ref)
        template = ((target or {}).get("spec") or {}).get("template") or {}
        load_target = ((template.get("metadata") or {}).get("annotations") or {}).get(LOAD_TARGET_ANNOTATION, "")
        load_name, load_of = (load_target, rates) if load_target else _external_load(spec, rates, queues)
        entry = self.hpas.setdefault(_key(hpa), {
            "target": f"{ref.get('kind')}/{ref.get('name')}", "loadTarget": load_name,
            "metrics": [m.get("type") for m in spec.get("metrics") or []],
            "minReplicas": spec.get("minReplicas", 1), "maxReplicas": spec.get("maxReplicas"),
            "series": {k: [] for k in ("time", "clusterTime", "load", "desired", "current", "replicas", "ready")}})
        entry["loadTarget"] = entry["loadTarget"] or load_name
        s = entry["series"]
        s["time"].append(wall)
        s["clusterTime"].append(cluster)
        s["load"].append(load_of.get(load_name.split(" ")[-1]) if load_name else None)
        s["desired"].append(status.get("desiredReplicas"))
        s["current"].append(status.get("currentReplicas"))
        s["replicas"].append(((target or {}).get("spec") or {}).get("replicas"))
        s["ready"].append(((target or {}).get("status") or {}).get("readyReplicas", 0) if target else None)

    def _sample_vpa(self, vpa: Obj, wall: float, cluster: float) -> None:
        spec, status = vpa.get("spec") or {}, vpa.get("status") or {}
        ref = spec.get("targetRef") or {}
        namespace = vpa["metadata"].get("namespace") or ""
        recs = ((status.get("recommendation") or {}).get("containerRecommendations") or [{}])
        rec = recs[0] if recs else {}
        container = rec.get("containerName", "")
        entry = self.vpas.setdefault(_key(vpa), {
            "target": f"{ref.get('kind')}/{ref.get('name')}",
            "mode": (spec.get("updatePolicy") or {}).get("updateMode", "Auto"),
            "series": {k: [] for k in ("time", "clusterTime", "cpuTarget", "cpuRequest", "memoryTarget",
                                       "memoryRequest", "pods")}})
        entry["container"] = container or entry.get("container", "")
        cpu_req, mem_req, pods = self._mean_requests(namespace, self._target(namespace, ref), entry["container"])
        s = entry["series"]
        s["time"].append(wall)
        s["clusterTime"].append(cluster)
        s["cpuTarget"].append(_cpu((rec.get("target") or {}).get("cpu")))
        s["memoryTarget"].append(_bytes((rec.get("target") or {}).get("memory")))
        s["cpuRequest"].append(cpu_req)
        s["memoryRequest"].append(mem_req)
        s["pods"].append(pods)

    def _mean_requests(self, namespace: str, target: Obj | None, container: str
                       ) -> tuple[float | None, float | None, int]:
        """Mean CPU (cores) and memory (bytes) request of ``container`` over the target's live pods."""
        selector = ((target or {}).get("spec") or {}).get("selector")
        if not selector:
            return None, None, 0
        pods = [p for p in self.core.list(POD, namespace, label_selector=LabelSelector.from_dict(selector)).items
                if not p["metadata"].get("deletionTimestamp")]
        cpu: list[float] = []
        mem: list[float] = []
        for pod in pods:
            for ctr in pod["spec"].get("containers") or []:
                if container and ctr.get("name") != container:
                    continue
                req = (ctr.get("resources") or {}).get("requests") or {}
                if (c := _cpu(req.get("cpu"))) is not None:
                    cpu.append(c)
                if (m := _bytes(req.get("memory"))) is not None:
                    mem.append(m)
                break
        return (sum(cpu) / len(cpu) if cpu else None, sum(mem) / len(mem) if mem else None, len(pods))

    # ---------------------------------------------------------------------------------------- summary
    def summary(self) -> dict[str, Any]:
        """The summary's ``autoscaling`` section: totals per HPA and VPA, with their series."""
        hpas = {}
        for key, entry in sorted(self.hpas.items()):
            s = entry["series"]
            replicas = [r for r in s["replicas"] if r is not None]
            loads = [x for x in s["load"] if x is not None]
            changes = sum(1 for a, b in itertools.pairwise(replicas) if a != b)
            hpas[key] = {k: v for k, v in entry.items() if k != "series"} | {
                "replicas": {"min": min(replicas, default=None), "max": max(replicas, default=None),
                             "final": replicas[-1] if replicas else None, "changes": changes},
                "load": {"min": min(loads, default=None), "max": max(loads, default=None)},
                "samples": len(s["time"]), "series": s}
        vpas = {}
        for key, entry in sorted(self.vpas.items()):
            s = entry["series"]
            targets = [x for x in s["cpuTarget"] if x is not None]
            vpas[key] = {k: v for k, v in entry.items() if k != "series"} | {
                "cpuTarget": targets[-1] if targets else None,
                "cpuRequest": next((x for x in reversed(s["cpuRequest"]) if x is not None), None),
                "recommended": bool(targets), "samples": len(s["time"]), "series": s}
        return {"hpas": hpas, "vpas": vpas}


def summary_lines(section: Mapping[str, Any]) -> list[str]:
    """The run summary's autoscaling lines (one per HPA and VPA)."""
    lines = []
    for key, h in (section.get("hpas") or {}).items():
        r, load = h["replicas"], h["load"]
        unit = "items" if h["loadTarget"].startswith("queue ") else "req/s"
        load_text = (f"load {load['min']:g} .. {load['max']:g} {unit} on {h['loadTarget']}"
                     if load["max"] is not None else "no load target")
        lines.append(f"{key} → {h['target']} ({', '.join(h['metrics'])}): replicas {r['min']} .. {r['max']}, "
                     f"final {r['final']}, {r['changes']} changes; {load_text}")
    for key, v in (section.get("vpas") or {}).items():
        target = "no recommendation" if v["cpuTarget"] is None else f"CPU target {v['cpuTarget'] * 1000:.0f}m"
        request = "" if v["cpuRequest"] is None else f", pods request {v['cpuRequest'] * 1000:.0f}m"
        lines.append(f"{key} → {v['target']} (VPA {v['mode']}): {target}{request}")
    return lines
