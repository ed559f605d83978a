"""A scenario's phases expanded into one timeline of actions.

:func:`build` turns a :class:`~loadgen.scenario.Scenario` into a sorted list
of :class:`Action` - create a pod, delete a pod, create or scale a
Deployment, set a load series value - each due at a time in seconds from the
start of the run. Everything random is drawn here, from streams seeded by
``(seed, phase name)``, so the same scenario and seed give the same timeline
(and adding a phase does not reshuffle the others); the driver
(:mod:`loadgen.runner`) only executes it. Pod manifests are built lazily
from a :class:`PodDraw` (a handful of strings), so a plan of a million pods
costs tens of megabytes, not gigabytes.

Phases run one after another: each starts when the previous phase's *own*
actions end (its last create, scale or series point), or at its ``at``
time. Trailing deletions (a pods phase's ``lifetime``, a trace's deletion
times) do not hold the next phase back - they overlap it, as pods dying
while new ones arrive do.

Churn is resolved here too: at each churn tick the plan knows which pods
earlier actions created and have not deleted yet, picks one (seeded), and
cancels that pod's own later deletion, so no pod is deleted twice.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any

from loadgen import trace
from loadgen.scenario import (
    HELD_FAULTS,
    BurstPhase,
    ChaosPhase,
    ChurnPhase,
    DeploymentsPhase,
    LoadPhase,
    Phase,
    PodsPhase,
    Scenario,
    TemplateSpec,
    TracePhase,
)

PROFILE_ANNOTATION = "kemu.io/profile"  # emulator.kubelet.profiles.PROFILE_ANNOTATION
LOAD_TARGET_ANNOTATION = "kemu.io/load-target"  # emulator.kubelet.load: the pod serves that target's requests
PHASE_LABEL = "kemu.io/phase"
PAUSE_IMAGE = "registry.k8s.io/pause:3.9"

# Action ops.
CREATE_POD, DELETE_POD, CREATE_DEPLOYMENT, SCALE_DEPLOYMENT, SET_LOAD, CREATE_HPA = (
    "create-pod", "delete-pod", "create-deployment", "scale-deployment", "set-load", "create-hpa")
# Chaos: inject fault ``name`` (detail: target, pick, id), or restore the held fault ``id``.
INJECT_FAULT, RESTORE_FAULT = "inject-fault", "restore-fault"


@dataclass(frozen=True, slots=True)
class PodDraw:
    """What was drawn for one pod; :meth:`manifest` builds the object when it is due."""

    cpu: str
    memory: str
    profile: str | None = None
    priority_class: str | None = None
    extended: tuple[tuple[str, str], ...] = ()  # (resource, quantity): GPU shares
    load_target: str = ""
    annotations: tuple[tuple[str, str], ...] = ()  # the template's, on every pod
    node_selector: tuple[tuple[str, str], ...] = ()

    def manifest(self, name: str, namespace: str, phase: str) -> dict[str, Any]:
        requests = {"cpu": self.cpu, "memory": self.memory, **dict(self.extended)}
        container: dict[str, Any] = {"name": "app", "image": PAUSE_IMAGE, "resources": {"requests": requests}}
        if self.extended:  # extended resources must have limits equal to requests
            container["resources"]["limits"] = dict(self.extended)
        meta: dict[str, Any] = {"name": name, "namespace": namespace,
                                "labels": {"app": "loadgen", PHASE_LABEL: phase}}
        if self.profile or self.annotations:
            meta["annotations"] = {**({PROFILE_ANNOTATION: self.profile} if self.profile else {}),
                                   **dict(self.annotations)}
        if self.load_target:
            meta.setdefault("annotations", {})[LOAD_TARGET_ANNOTATION] = self.load_target
        spec: dict[str, Any] = {"containers": [container]}
        if self.node_selector:
            spec["nodeSelector"] = dict(self.node_selector)
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        return {"metadata": meta, "spec": spec}


@dataclass(frozen=True, slots=True)
class Action:
    t: float  # seconds from the start of the run
    op: str
    namespace: str
    name: str
    phase: str
    pod: PodDraw | None = None  # create-pod
    value: float = 0.0  # scale-deployment: replicas; set-load: the series value
    detail: tuple[tuple[str, Any], ...] = ()  # create-deployment: (replicas, template); set-load: (kind, target)

    def body(self) -> dict[str, Any]:
        """The object a create sends."""
        if self.op == CREATE_POD:
            assert self.pod is not None
            return self.pod.manifest(self.name, self.namespace, self.phase)
        if self.op == CREATE_DEPLOYMENT:
            d = dict(self.detail)
            pod = d["pod"].manifest("", self.namespace, self.phase)
            labels = {"app": self.name, PHASE_LABEL: self.phase}
            return {"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": self.name, "namespace": self.namespace, "labels": dict(labels)},
                    "spec": {"replicas": d["replicas"], "selector": {"matchLabels": {"app": self.name}},
                             "template": {"metadata": {"labels": labels,
                                                       "annotations": pod["metadata"].get("annotations", {})},
                                          "spec": pod["spec"]}}}
        if self.op == CREATE_HPA:
            d = dict(self.detail)
            return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                    "metadata": {"name": self.name, "namespace": self.namespace,
                                 "labels": {PHASE_LABEL: self.phase}},
                    "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": self.name},
                             "minReplicas": d["min"], "maxReplicas": d["max"],
                             "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                                 "type": "Utilization", "averageUtilization": d["cpu"]}}}]}}
        raise ValueError(f"{self.op} has no body")


@dataclass
class PhaseWindow:
    name: str
    kind: str
    start: float
    end: float
    actions: int = 0


@dataclass
class Plan:
    actions: list[Action]
    phases: list[PhaseWindow] = field(default_factory=list)

    def count(self, op: str) -> int:
        return sum(1 for a in self.actions if a.op == op)

    def expected_pods(self) -> int:
        """Pods the run should see created: its own, plus the Deployments' replicas at their largest."""
        own = self.count(CREATE_POD)
        replicas: dict[str, float] = {}
        for a in self.actions:
            if a.op == CREATE_DEPLOYMENT:
                replicas[a.name] = dict(a.detail)["replicas"]
            elif a.op == SCALE_DEPLOYMENT:
                replicas[a.name] = max(replicas.get(a.name, 0), a.value)
        return own + int(sum(replicas.values()))


def build(s: Scenario) -> Plan:
    """The scenario's timeline: every phase expanded, churn resolved, sorted by due time (stable)."""
    actions: list[Action] = []
    windows: list[PhaseWindow] = []
    churn: list[tuple[Phase, float]] = []
    cursor = 0.0
    for phase in s.phases:
        start = cursor if phase.at is None else phase.at
        if isinstance(phase.spec, ChurnPhase):
            churn.append((phase, start))
            end = start + phase.spec.duration
        else:
            own, end = _expand(s, phase, start)
            actions += own
            windows.append(PhaseWindow(phase.name, phase.kind, start, end, len(own)))
        cursor = end if phase.at is None else max(cursor, end)
    for phase, start in churn:
        deletes = _churn(s, phase, start, actions)
        actions += deletes
        windows.append(PhaseWindow(phase.name, phase.kind, start, start + phase.spec.duration, len(deletes)))
    actions = [a for a in actions if a.op != "cancelled"]
    actions.sort(key=lambda a: a.t)  # stable: equal times keep phase order
    windows.sort(key=lambda w: w.start)
    return Plan(actions, windows)


def _expand(s: Scenario, phase: Phase, start: float) -> tuple[list[Action], float]:
    spec = phase.spec
    rng = random.Random(f"{s.seed}:{phase.name}")
    if isinstance(spec, PodsPhase | BurstPhase):
        rate = spec.rate if isinstance(spec, PodsPhase) else 0.0
        arrival = spec.arrival if isinstance(spec, PodsPhase) else "constant"
        times = arrival_times(spec.count, rate, arrival, random.Random(f"{s.seed}:{phase.name}:arrivals"))
        template = s.templates[spec.template]
        out: list[Action] = []
        lifetime = spec.lifetime if isinstance(spec, PodsPhase) else 0.0
        for i, t in enumerate(times):
            name, ns = f"{phase.name}-{i:06d}", f"load-{i % s.namespaces}"
            out.append(Action(start + t, CREATE_POD, ns, name, phase.name, pod=draw(template, s, rng)))
            if lifetime:
                out.append(Action(start + t + lifetime, DELETE_POD, ns, name, phase.name))
        return out, start + (times[-1] if times else 0.0)
    if isinstance(spec, DeploymentsPhase):
        template = s.templates[spec.template]
        out = []
        for i in range(spec.count):
            name, ns = f"{phase.name}-{i:03d}", f"load-{i % s.namespaces}"
            out.append(Action(start, CREATE_DEPLOYMENT, ns, name, phase.name,
                              detail=(("replicas", spec.replicas), ("pod", draw(template, s, rng)))))
            if spec.hpa_max > 0:
                out.append(Action(start, CREATE_HPA, ns, name, phase.name,
                                  detail=(("min", spec.hpa_min), ("max", spec.hpa_max), ("cpu", spec.hpa_cpu))))
            if spec.scale_to >= 0:
                out.append(Action(start + spec.scale_after, SCALE_DEPLOYMENT, ns, name, phase.name,
                                  value=spec.scale_to))
        return out, start + (spec.scale_after if spec.scale_to >= 0 else 0.0)
    if isinstance(spec, TracePhase):
        return _trace(s, phase, spec, start)
    if isinstance(spec, LoadPhase):
        return _load(s, phase, spec, start, rng), start + spec.duration
    if isinstance(spec, ChaosPhase):
        return _chaos(phase, spec, start, rng)
    raise AssertionError(f"unexpanded phase kind {phase.kind}")


def draw(t: TemplateSpec, s: Scenario, rng: random.Random) -> PodDraw:
    """One pod's shape. Draws in a fixed order, and only for what the template uses, so adding a
    feature to one template does not reshuffle the requests of another."""
    cpu, memory = rng.choice(t.cpu), rng.choice(t.memory)
    profile = rng.choice(t.profile) if t.profile else None
    gpu = rng.choice(t.gpu_milli) if t.gpu_milli else None
    if t.priority:
        priority: str | None = t.priority
    elif s.priorities:
        priority = rng.choices([p.name for p in s.priorities], [p.weight for p in s.priorities])[0]
    else:
        priority = None
    extended = ((trace.GPU_MILLI_RESOURCE, gpu),) if gpu and gpu != "0" else ()
    return PodDraw(cpu, memory, profile, priority, extended, t.load_target,  # load_target: no draw
                   t.annotations, t.node_selector)


def arrival_times(count: int, rate: float, arrival: str, rng: random.Random) -> list[float]:
    """Seconds after the phase start at which each pod is due: i/rate, or a Poisson process of that rate."""
    if rate <= 0:
        return [0.0] * count
    if arrival == "constant":
        return [i / rate for i in range(count)]
    t, out = 0.0, []
    for _ in range(count):
        out.append(t)
        t += rng.expovariate(rate)
    return out


def _trace(s: Scenario, phase: Phase, spec: TracePhase, start: float) -> tuple[list[Action], float]:
    rows = trace.pods(s.resolve(spec.file, trace=True), offset=spec.offset, limit=spec.limit)
    if not rows:
        return [], start
    t0 = rows[0].created
    out: list[Action] = []
    last = start
    for i, p in enumerate(rows):
        t = (p.created - t0) / spec.speedup
        if spec.max_duration and t > spec.max_duration:
            break
        ns = f"load-{i % s.namespaces}"
        extended = ((trace.GPU_MILLI_RESOURCE, str(p.gpu_milli)),) if p.gpu_milli else ()
        priority = s.priorities[0].name if s.priorities else None
        # gpu_spec (the models the pod may run on) as the annotation GPUShare and the device manager read,
        # as `kemu bench openb` builds its pods (loadgen.bench_openb.pod_object).
        spec_annotation = ((trace.GPU_MODEL_LABEL, p.gpu_spec),) if p.gpu_spec else ()
        pod = PodDraw(f"{p.cpu_milli}m", f"{p.memory_mib}Mi", None, priority, extended, annotations=spec_annotation)
        out.append(Action(start + t, CREATE_POD, ns, p.name, phase.name, pod=pod))
        last = start + t
        if spec.deletions and p.deleted is not None and p.deleted > p.created:
            d = (p.deleted - t0) / spec.speedup
            if not spec.max_duration or d <= spec.max_duration:
                out.append(Action(start + d, DELETE_POD, ns, p.name, phase.name))
    return out, last


def _load(s: Scenario, phase: Phase, spec: LoadPhase, start: float, rng: random.Random) -> list[Action]:
    out = []
    for i in range(int(spec.duration) + 1):
        x = i / spec.duration if spec.duration else 0.0
        if spec.shape == "constant":
            v = spec.base
        elif spec.shape == "ramp":
            v = spec.base + spec.amplitude * x
        elif spec.shape == "step":
            v = spec.base + (spec.amplitude if x >= 0.5 else 0.0)
        else:
            v = spec.base + spec.amplitude * math.sin(2 * math.pi * i / spec.period)
        if spec.noise:
            v *= 1 + rng.uniform(-spec.noise, spec.noise)
        out.append(Action(start + i, SET_LOAD, "", spec.target, phase.name, value=round(max(0.0, v), 3),
                          detail=(("kind", spec.kind),)))
    return out


def _chaos(phase: Phase, spec: ChaosPhase, start: float, rng: random.Random) -> tuple[list[Action], float]:
    """The listed faults, then ``random`` more drawn over the phase's duration. A fault without a target gets
    a ``pick`` in [0, 1) that the injector maps onto the parts it finds (a shard index, a node), so the same
    seed hits the same part whatever the cluster's size; a held fault gets its restore ``duration`` later."""
    faults = [(f.at, f.kind, f.target, f.duration) for f in spec.faults]
    for _ in range(spec.random):
        faults.append((rng.uniform(0, spec.duration), rng.choice(spec.kinds), "", spec.fault_duration))
    out = []
    for n, (at, kind, target, duration) in enumerate(sorted(faults, key=lambda f: f[0])):
        ident = f"{phase.name}-{n}"
        out.append(Action(start + at, INJECT_FAULT, "", kind, phase.name,
                          detail=(("target", target), ("pick", rng.random()), ("id", ident))))
        if kind in HELD_FAULTS:
            out.append(Action(start + at + duration, RESTORE_FAULT, "", kind, phase.name, detail=(("id", ident),)))
    return out, start + max([spec.duration, *(a.t - start for a in out)])


def _churn(s: Scenario, phase: Phase, start: float, actions: list[Action]) -> list[Action]:
    """Deletes of pods live at each tick (created before it by an earlier action, not yet deleted)."""
    spec = phase.spec
    assert isinstance(spec, ChurnPhase)
    rng = random.Random(f"{s.seed}:{phase.name}")
    ticks = [start + i / spec.rate for i in range(int(spec.duration * spec.rate))]
    events = sorted((a.t, idx) for idx, a in enumerate(actions) if a.op in (CREATE_POD, DELETE_POD))
    live: list[tuple[str, str]] = []  # swap-remove list plus an index: O(1) random picks and removals
    where: dict[tuple[str, str], int] = {}
    own_delete: dict[tuple[str, str], int] = {}
    for idx, a in enumerate(actions):
        if a.op == DELETE_POD:
            own_delete[(a.namespace, a.name)] = idx

    def remove(key: tuple[str, str]) -> None:
        i = where.pop(key)
        last = live.pop()
        if i < len(live):
            live[i] = last
            where[last] = i

    out: list[Action] = []
    e = 0
    for tick in ticks:
        while e < len(events) and events[e][0] < tick:
            a = actions[events[e][1]]
            key = (a.namespace, a.name)
            if a.op == CREATE_POD:
                where[key] = len(live)
                live.append(key)
            elif a.op == DELETE_POD and key in where:
                remove(key)
            e += 1
        if not live:
            continue
        key = live[rng.randrange(len(live))]
        remove(key)
        out.append(Action(tick, DELETE_POD, key[0], key[1], phase.name))
        idx = own_delete.pop(key, None)
        if idx is not None:  # the pod would have been deleted later by its own phase: not twice
            old = actions[idx]
            actions[idx] = Action(old.t, "cancelled", old.namespace, old.name, old.phase)
    return out


def pod_manifest(name: str, namespace: str, cpu: str, memory: str, *, profile: str | None = None,
                 priority_class: str | None = None, phase: str = "bench") -> dict[str, Any]:
    """One loadgen pod (the benchmarks' unit of work), as a plan's create would send it."""
    return PodDraw(cpu, memory, profile, priority_class).manifest(name, namespace, phase)
