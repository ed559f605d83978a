"""Scenario files: a cluster, its schedulers, a load driver and workload phases, as data.

A scenario is YAML validated into frozen dataclasses. An unknown key, a value
of the wrong type or an impossible combination is a :class:`ScenarioError`
naming the key path (``phases[1].pods.rate: expected a number >= 0, got
'fast'``). What the phases *do* is expanded by :mod:`loadgen.plan` into one
timeline of actions; the same scenario and seed always give the same
timeline.

The schema, key by key, is ``docs/scenarios.md``; the defaults are the
dataclasses below. The cluster section maps onto kemu's own configuration
(``node_pools``, ``kubelet_shards``, ``schedulers`` in
:class:`emulator.config.Config`), so a scenario's cluster is exactly what
``kemu up`` runs with the same pools. ``objects`` are manifests (Deployments,
HPAs, VPAs ...) the run creates before the load starts (:mod:`loadgen.autoscalers`);
here only their shape is checked, the API server validates the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from emulator import loadtargets
from emulator.api.quantity import QuantityError, parse_quantity
from emulator.kubelet.nodes import NodeConfigError, NodePool
from emulator.yamlfile import read_yaml_file

# Where openb trace files are looked up when a scenario names one that is not next to it.
DATASETS_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets" / "openb"
SAMPLE_DIR = Path(__file__).resolve().parent / "traces"


class ScenarioError(ValueError):
    pass


# -- sections --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceNodesSpec:
    file: str = ""
    limit: int = 0


@dataclass(frozen=True)
class ClusterSpec:
    nodes: int = 0
    node_cpu: str = "32"
    node_memory: str = "128Gi"
    node_pods: int = 110
    zones: int = 3
    node_pools: tuple[dict[str, Any], ...] = ()
    # Autoscaled node groups of the emulated cloud and the Cluster Autoscaler's flags (emulator.cloud,
    # emulator.clusterautoscaler): what `kemu up --node-groups` and the `cluster_autoscaler` config key take.
    node_groups: tuple[dict[str, Any], ...] = ()
    cluster_autoscaler: dict[str, Any] | None = None
    trace_nodes: TraceNodesSpec | None = None
    kubelet_shards: int = 0  # 0: kemu's default (one shard per 1,250 nodes)

    def shorthand_pool(self) -> dict[str, Any] | None:
        """``nodes``/``node_cpu``/... as one node pool (:class:`emulator.kubelet.nodes.NodePool` data)."""
        if not self.nodes:
            return None
        return {"name": "node", "count": self.nodes,
                "capacity": {"cpu": self.node_cpu, "memory": self.node_memory, "pods": str(self.node_pods)},
                "zones": [f"zone-{chr(97 + i)}" for i in range(self.zones)]}


@dataclass(frozen=True)
class SchedulersSpec:
    count: int = 1
    config: str = ""


@dataclass(frozen=True)
class DriverSpec:
    kind: str = "store"
    processes: int = 1
    batch: int = 100
    concurrency: int = 8
    max_backlog: int = 2000


DRIVER_KINDS = ("store", "http", "null")


@dataclass(frozen=True)
class PriorityClassSpec:
    name: str
    value: int
    weight: float = 1.0


@dataclass(frozen=True)
class TemplateSpec:
    cpu: tuple[str, ...] = ("100m",)
    memory: tuple[str, ...] = ("128Mi",)
    profile: tuple[str, ...] = ()
    gpu_milli: tuple[str, ...] = ()  # alibabacloud.com/gpu-milli requests drawn per pod (openb's GPU sharing)
    priority: str = ""  # a PriorityClass name; "" draws from the scenario's priority mix
    load_target: str = ""  # the pods serve this load target's requests (kemu.io/load-target); "": none
    # Set on every pod of the template, not drawn: usage overrides (kemu.io/cpu: "3") and a nodeSelector.
    annotations: tuple[tuple[str, str], ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()


# -- phases ----------------------------------------------------------------------------------------------------

ARRIVALS = ("constant", "poisson")


@dataclass(frozen=True)
class PodsPhase:
    """Open-loop pod creation at ``rate`` pods/s (0: as fast as the driver goes)."""

    count: int = 1000
    rate: float = 0.0
    arrival: str = "constant"
    template: str = "default"
    lifetime: float = 0.0  # seconds after creation each pod is deleted (0: kept)


@dataclass(frozen=True)
class BurstPhase:
    """``count`` pods due at the same instant."""

    count: int = 100
    template: str = "default"


@dataclass(frozen=True)
class DeploymentsPhase:
    """Deployments created (their controller makes the pods), optionally scaled later."""

    count: int = 1
    replicas: int = 10
    template: str = "default"
    scale_to: int = -1  # -1: never scaled
    scale_after: float = 10.0
    # A HorizontalPodAutoscaler (autoscaling/v2) per Deployment when hpa_max > 0: replicas between hpa_min and
    # hpa_max, target average CPU utilization hpa_cpu percent of the requests.
    hpa_min: int = 1
    hpa_max: int = 0
    hpa_cpu: int = 60


@dataclass(frozen=True)
class ChurnPhase:
    """Deletes of live pods created by earlier phases, picked at random (seeded), at ``rate``/s."""

    rate: float = 10.0
    duration: float = 10.0


@dataclass(frozen=True)
class TracePhase:
    """Replay of an openb pod list: creation/deletion times divided by ``speedup``."""

    file: str = "openb_pod_list_default.csv"
    speedup: float = 10000.0
    offset: int = 0  # skip the first N pods in creation order (the trace's start is sparse)
    limit: int = 0  # then at most N pods (0: all)
    deletions: bool = True
    max_duration: float = 0.0  # cut the compressed replay after this many seconds (0: all of it)


LOAD_KINDS = ("http", "queue", "push")  # push: items/s RPUSHed onto a real Redis list (loadgen.queues)
SHAPES = ("constant", "ramp", "step", "sine")


@dataclass(frozen=True)
class LoadPhase:
    """A request-rate (``http``), queue-depth (``queue``) or items-pushed (``push``) series, one value a second."""

    kind: str = "http"
    target: str = "web"
    shape: str = "constant"
    base: float = 100.0
    amplitude: float = 0.0  # ramp: the increase over the duration; step: the jump at half time; sine: the swing
    period: float = 60.0
    duration: float = 60.0
    noise: float = 0.0  # multiplicative noise, 0.1 = +-10 % (seeded)


# Faults a chaos phase injects (loadgen.chaos). Kills are kill -9 of one replica of a part, which its
# supervisor (Ray for actors, kemu's own for processes and controller managers) brings back; partition and
# stop-kubelet hold for the fault's duration through the fault table (emulator.chaos), then are restored.
KILL_KUBELET_SHARD, KILL_SCHEDULER, KILL_CONTROLLER_MANAGER = (
    "kill-kubelet-shard", "kill-scheduler", "kill-controller-manager")
KILL_REDIS, KILL_APISERVER = "kill-redis", "kill-apiserver"
PARTITION_SHARD, STOP_KUBELET = "partition-shard", "stop-kubelet"
FAULT_KINDS = (KILL_KUBELET_SHARD, KILL_SCHEDULER, KILL_CONTROLLER_MANAGER, KILL_REDIS, KILL_APISERVER,
               PARTITION_SHARD, STOP_KUBELET)
HELD_FAULTS = (PARTITION_SHARD, STOP_KUBELET)  # these last ``duration`` seconds, then are restored


@dataclass(frozen=True)
class FaultSpec:
    """One scheduled fault: ``kind`` at ``at`` seconds from the phase start."""

    kind: str
    at: float = 0.0
    target: str = ""  # a shard or scheduler index, a node name; "": drawn from the run's seed when injected
    duration: float = 10.0  # partition-shard, stop-kubelet: how long the fault holds


@dataclass(frozen=True)
class ChaosPhase:
    """Faults injected while the load runs: the listed ones, plus ``random`` drawn (seeded) over ``duration``."""

    faults: tuple[FaultSpec, ...] = ()
    random: int = 0
    kinds: tuple[str, ...] = (KILL_KUBELET_SHARD, KILL_SCHEDULER, KILL_CONTROLLER_MANAGER, PARTITION_SHARD,
                              STOP_KUBELET)  # what random faults are drawn from
    duration: float = 60.0
    fault_duration: float = 10.0  # the held faults' duration when drawn


PHASE_KINDS: dict[str, type] = {"pods": PodsPhase, "burst": BurstPhase, "deployments": DeploymentsPhase,
                                "churn": ChurnPhase, "trace": TracePhase, "load": LoadPhase, "chaos": ChaosPhase}


@dataclass(frozen=True)
class Phase:
    name: str
    kind: str
    spec: Any
    at: float | None = None  # seconds from the start; None: when the previous phase's timeline ends


@dataclass(frozen=True)
class Scenario:
    name: str = "scenario"
    seed: int = 0
    clock_speed: float = 1.0
    cluster: ClusterSpec = ClusterSpec()
    schedulers: SchedulersSpec = SchedulersSpec()
    controllers: bool = True
    controller_manager: dict[str, Any] = field(default_factory=dict)  # ManagerConfig settings (kemu's config)
    compare: dict[str, dict[str, Any]] = field(default_factory=dict)  # variant -> overrides, for --compare
    driver: DriverSpec = DriverSpec()
    namespaces: int = 1
    priorities: tuple[PriorityClassSpec, ...] = ()
    templates: dict[str, TemplateSpec] = field(default_factory=lambda: {"default": TemplateSpec()})
    phases: tuple[Phase, ...] = ()
    # Manifests created before the load starts (Deployments, their HPAs and VPAs: loadgen.autoscalers).
    objects: tuple[dict[str, Any], ...] = ()
    expect_pending: int = 0
    settle_timeout: float = 60.0
    base_dir: Path = Path(".")  # where relative file names (trace files, scheduler config) are resolved

    @classmethod
    def load(cls, path: Path) -> Scenario:
        data = read_yaml_file(path, "scenario", ScenarioError)
        if not isinstance(data, dict):
            raise ScenarioError(f"scenario {path} must be a mapping")
        return cls.from_dict(data, base_dir=Path(path).resolve().parent)

    @classmethod
    def from_dict(cls, data: dict[str, Any], base_dir: Path = Path(".")) -> Scenario:
        _mapping(data, "scenario")
        _no_unknown(data, {f.name for f in fields(cls)} - {"base_dir"}, "")
        cluster = dict(_mapping(data.get("cluster") or {}, "cluster"))
        pools = _pools(cluster.pop("node_pools", None) or [])
        groups, autoscaler = _autoscaling(cluster.pop("node_groups", None) or [],
                                          cluster.pop("cluster_autoscaler", None) or {})
        trace_nodes = cluster.pop("trace_nodes", None)
        scenario = cls(
            name=str(data.get("name", "scenario")),
            seed=_int(data.get("seed", 0), "seed"),
            clock_speed=_float(data.get("clock_speed", 1.0), "clock_speed"),
            cluster=_section(ClusterSpec, cluster, "cluster", extra={
                "node_pools": pools, "node_groups": groups, "cluster_autoscaler": autoscaler,
                "trace_nodes": None if trace_nodes is None else _section(TraceNodesSpec, trace_nodes,
                                                                         "cluster.trace_nodes")}),
            schedulers=_section(SchedulersSpec, data.get("schedulers") or {}, "schedulers"),
            controllers=_bool(data.get("controllers", True), "controllers"),
            controller_manager=dict(_mapping(data.get("controller_manager") or {}, "controller_manager")),
            compare=_compare(data.get("compare")),
            driver=_section(DriverSpec, data.get("driver") or {}, "driver"),
            namespaces=_int(data.get("namespaces", 1), "namespaces"),
            priorities=_priorities(data.get("priorities") or []),
            templates=_templates(data.get("templates")),
            phases=_phases(data.get("phases") or []),
            objects=_objects(data.get("objects") or []),
            expect_pending=_int(data.get("expect_pending", 0), "expect_pending"),
            settle_timeout=_float(data.get("settle_timeout", 60.0), "settle_timeout"),
            base_dir=base_dir,
        )
        _check(scenario)
        return scenario

    # -- derived -------------------------------------------------------------------------------------------------

    def variant(self, name: str) -> Scenario:
        """The scenario as compare variant ``name`` runs it: its sections replaced, name suffixed."""
        from dataclasses import replace

        overrides = self.compare[name]
        out = replace(self, name=f"{self.name}-{name}")
        if "schedulers" in overrides:
            out = replace(out, schedulers=_section(SchedulersSpec, overrides["schedulers"] or {},
                                                   f"compare.{name}.schedulers"))
        if "controller_manager" in overrides:
            out = replace(out, controller_manager=dict(overrides["controller_manager"] or {}))
        return out

    def has_autoscalers(self) -> bool:
        """The scenario applies HorizontalPodAutoscalers or VerticalPodAutoscalers (the run samples them)."""
        return any(o.get("kind") in ("HorizontalPodAutoscaler", "VerticalPodAutoscaler") for o in self.objects)

    def has_keda(self) -> bool:
        """The scenario applies KEDA ScaledObjects or ScaledJobs (the run samples them: loadgen.keda)."""
        return any(o.get("kind") in ("ScaledObject", "ScaledJob") for o in self.objects)

    def node_pools(self) -> list[dict[str, Any]]:
        """Every node pool of the cluster: the shorthand pool, ``node_pools``, and the trace's node shapes."""
        from loadgen import trace

        pools = [p for p in (self.cluster.shorthand_pool(),) if p] + [dict(p) for p in self.cluster.node_pools]
        t = self.cluster.trace_nodes
        if t is not None:
            pools += trace.node_pools(self.resolve(t.file, trace=True), t.limit)
        return pools

    def node_count(self) -> int:
        """Nodes the cluster starts with: the pools', and the node groups' initial sizes (default: their min)."""
        groups = sum(int(g.get("initial_size", g.get("min", 0)) or 0) for g in self.cluster.node_groups)
        return sum(int(p.get("count", 0)) for p in self.node_pools()) + groups

    def resolve(self, name: str, *, trace: bool = False) -> Path:
        """A file the scenario names: absolute, next to the scenario, or (traces) in the datasets directories."""
        p = Path(name)
        candidates = [p] if p.is_absolute() else [self.base_dir / p]
        if trace and not p.is_absolute():
            candidates += [DATASETS_DIR / p, SAMPLE_DIR / p]
        for c in candidates:
            if c.exists():
                return c
        raise ScenarioError(f"{name}: no such file (looked in {', '.join(str(c.parent) for c in candidates)})")


# -- validation ------------------------------------------------------------------------------------------------


def _check(s: Scenario) -> None:
    c, d = s.cluster, s.driver
    for path, value in (("cluster.node_cpu", c.node_cpu), ("cluster.node_memory", c.node_memory)):
        _quantity(value, path)
    if c.zones < 1 or c.zones > 26:
        raise ScenarioError("cluster.zones: must be between 1 and 26")
    if d.kind not in DRIVER_KINDS:
        raise ScenarioError(f"driver.kind: must be one of {', '.join(DRIVER_KINDS)}, got {d.kind!r}")
    for key in ("processes", "batch", "concurrency", "max_backlog"):
        if getattr(d, key) < 1:
            raise ScenarioError(f"driver.{key}: must be at least 1")
    if s.namespaces < 1:
        raise ScenarioError("namespaces: must be at least 1")
    if s.clock_speed <= 0:
        raise ScenarioError("clock_speed: must be positive")
    if c.trace_nodes is not None:
        s.resolve(c.trace_nodes.file, trace=True)  # a missing file is an error now, not mid-run
    if s.schedulers.config:
        s.resolve(s.schedulers.config)
    nodes = s.node_count()
    if nodes and not s.schedulers.count:
        raise ScenarioError("schedulers.count: must be at least 1 when the cluster has nodes")
    priorities = {p.name for p in s.priorities}
    for name, t in s.templates.items():
        where = f"templates.{name}"
        for key in ("cpu", "memory", "gpu_milli"):
            for i, v in enumerate(getattr(t, key)):
                _quantity(v, f"{where}.{key}[{i}]")
        if t.load_target:
            try:
                loadtargets.validate_name(t.load_target)
            except loadtargets.LoadTargetError as e:
                raise ScenarioError(f"{where}.load_target: {e}") from None
        if t.priority and t.priority not in priorities:
            raise ScenarioError(f"{where}.priority: {t.priority!r} is not one of the scenario's priorities "
                                f"({', '.join(sorted(priorities)) or 'none defined'})")
        if t.profile:
            from emulator.kubelet.profiles import BUILTIN_PROFILE_DIR

            known = sorted(p.stem for p in BUILTIN_PROFILE_DIR.glob("*.yaml"))
            for i, profile in enumerate(t.profile):
                if profile not in known:
                    raise ScenarioError(f"{where}.profile[{i}]: unknown profile {profile!r} "
                                        f"(known: {', '.join(known)})")
    for i, phase in enumerate(s.phases):
        _check_phase(s, phase, f"phases[{i}].{phase.kind}")
    total = sum(p.spec.count for p in s.phases if p.kind in ("pods", "burst"))
    if s.expect_pending > total + sum(p.spec.count * p.spec.replicas for p in s.phases if p.kind == "deployments") \
            and not any(p.kind == "trace" for p in s.phases):
        raise ScenarioError(f"expect_pending: {s.expect_pending} is more than the pods the phases create")


def _check_phase(s: Scenario, phase: Phase, where: str) -> None:
    spec = phase.spec
    template = getattr(spec, "template", None)
    if template is not None and template not in s.templates:
        raise ScenarioError(f"{where}.template: no template {template!r} (templates: {', '.join(s.templates)})")
    if isinstance(spec, PodsPhase):
        if spec.arrival not in ARRIVALS:
            raise ScenarioError(f"{where}.arrival: must be one of {', '.join(ARRIVALS)}, got {spec.arrival!r}")
        if spec.arrival == "poisson" and spec.rate <= 0:
            raise ScenarioError(f"{where}.rate: poisson arrivals need a rate > 0 (pods/s)")
    elif isinstance(spec, DeploymentsPhase):
        if spec.scale_to < -1:
            raise ScenarioError(f"{where}.scale_to: expected replicas >= 0 (or -1: not scaled)")
    elif isinstance(spec, ChurnPhase):
        if spec.rate <= 0:
            raise ScenarioError(f"{where}.rate: must be > 0 deletes/s")
    elif isinstance(spec, TracePhase):
        if spec.speedup <= 0:
            raise ScenarioError(f"{where}.speedup: must be > 0")
        s.resolve(spec.file, trace=True)
    elif isinstance(spec, ChaosPhase):
        for i, f in enumerate(spec.faults):
            _fault_kind(f.kind, f"{where}.faults[{i}].kind")
            if f.at < 0 or f.duration <= 0:
                raise ScenarioError(f"{where}.faults[{i}]: at must be >= 0 and duration > 0")
        for i, kind in enumerate(spec.kinds):
            _fault_kind(kind, f"{where}.kinds[{i}]")
        if spec.random and not spec.kinds:
            raise ScenarioError(f"{where}.kinds: random faults need kinds to draw from")
        if spec.duration <= 0 or spec.fault_duration <= 0:
            raise ScenarioError(f"{where}: duration and fault_duration must be > 0")
    elif isinstance(spec, LoadPhase):
        if spec.kind not in LOAD_KINDS:
            raise ScenarioError(f"{where}.kind: must be one of {', '.join(LOAD_KINDS)}, got {spec.kind!r}")
        if spec.shape not in SHAPES:
            raise ScenarioError(f"{where}.shape: must be one of {', '.join(SHAPES)}, got {spec.shape!r}")
        if spec.shape == "sine" and spec.period <= 0:
            raise ScenarioError(f"{where}.period: must be > 0 for a sine")
        try:
            loadtargets.validate_name(spec.target)  # the run writes it as a load target (emulator.loadtargets)
        except loadtargets.LoadTargetError as e:
            raise ScenarioError(f"{where}.target: {e}") from None


def _faults(items: Any, where: str) -> tuple[FaultSpec, ...]:
    if not isinstance(items, list):
        raise ScenarioError(f"{where}: expected a list of faults (kind, at, target, duration)")
    out = []
    for i, raw in enumerate(items):
        item = _mapping(raw, f"{where}[{i}]")
        if "kind" not in item:
            raise ScenarioError(f"{where}[{i}].kind: required (one of {', '.join(FAULT_KINDS)})")
        out.append(_section(FaultSpec, item, f"{where}[{i}]"))
    return tuple(out)


def _fault_kind(kind: str, where: str) -> None:
    if kind not in FAULT_KINDS:
        raise ScenarioError(f"{where}: must be one of {', '.join(FAULT_KINDS)}, got {kind!r}")


def _phases(items: Any) -> tuple[Phase, ...]:
    if not isinstance(items, list):
        raise ScenarioError("phases: expected a list of phases (each one of: " + ", ".join(PHASE_KINDS) + ")")
    out: list[Phase] = []
    for i, raw in enumerate(items):
        where = f"phases[{i}]"
        item = _mapping(raw, where)
        kinds = [k for k in item if k in PHASE_KINDS]
        _no_unknown(item, {"name", "at", *PHASE_KINDS}, where)
        if len(kinds) != 1:
            raise ScenarioError(f"{where}: needs exactly one of {', '.join(PHASE_KINDS)}"
                                + (f" (got {', '.join(kinds)})" if kinds else ""))
        kind = kinds[0]
        body = item[kind] or {}
        extra = None
        if kind == "chaos":  # its faults are a list of mappings, validated one by one
            body = dict(_mapping(body, f"{where}.{kind}"))
            extra = {"faults": _faults(body.pop("faults", None) or [], f"{where}.{kind}.faults")}
        spec = _section(PHASE_KINDS[kind], body, f"{where}.{kind}", extra=extra)
        at = None if item.get("at") is None else _float(item["at"], f"{where}.at")
        out.append(Phase(str(item.get("name") or f"{kind}-{i}"), kind, spec, at))
    names = [p.name for p in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise ScenarioError(f"phases: two phases are named {dup!r}")
    return tuple(out)


def _objects(items: Any) -> tuple[dict[str, Any], ...]:
    """``objects``: manifests of kinds kemu serves, each with a name, none twice; the API server validates
    the rest when the run creates them."""
    from emulator.api import errors
    from emulator.api.kinds import by_api_version_kind

    if not isinstance(items, list):
        raise ScenarioError("objects: expected a list of manifests (apiVersion, kind, metadata, spec)")
    seen: set[tuple[str, str, str]] = set()
    for i, obj in enumerate(items):
        where = f"objects[{i}]"
        _mapping(obj, where)
        for key in ("apiVersion", "kind"):
            if not isinstance(obj.get(key), str) or not obj[key]:
                raise ScenarioError(f"{where}.{key}: required")
        try:
            kind = by_api_version_kind(obj["apiVersion"], obj["kind"])
        except errors.StatusError as e:
            raise ScenarioError(f"{where}.kind: {e.message}") from None
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise ScenarioError(f"{where}.metadata.name: required")
        namespace = meta.get("namespace", "default")
        if not kind.namespaced and "namespace" in meta:
            raise ScenarioError(f"{where}.metadata.namespace: {kind.kind} is not namespaced")
        if kind.namespaced and (not isinstance(namespace, str) or not namespace):
            raise ScenarioError(f"{where}.metadata.namespace: expected a namespace name")
        key = (kind.resource, namespace if kind.namespaced else "", meta["name"])
        if key in seen:
            raise ScenarioError(f"{where}: {kind.kind} {meta['name']!r} appears twice in objects")
        seen.add(key)
    return tuple(items)


def _templates(data: Any) -> dict[str, TemplateSpec]:
    if data is None:
        return {"default": TemplateSpec()}
    out = {}
    for name, given in _mapping(data, "templates").items():
        raw = dict(_mapping(given or {}, f"templates.{name}"))
        extra = {key: tuple((str(k), str(v)) for k, v in _mapping(raw.pop(key), f"templates.{name}.{key}").items())
                 for key in ("annotations", "node_selector") if key in raw}
        out[str(name)] = _section(TemplateSpec, raw, f"templates.{name}", extra=extra)
    out.setdefault("default", TemplateSpec())
    return out


COMPARE_KEYS = {"schedulers", "controller_manager"}


def _compare(data: Any) -> dict[str, dict[str, Any]]:
    """``compare``: variant name -> the sections it overrides (``schedulers``, ``controller_manager``)."""
    out: dict[str, dict[str, Any]] = {}
    for name, given in _mapping(data or {}, "compare").items():
        raw = dict(_mapping(given or {}, f"compare.{name}"))
        _no_unknown(raw, COMPARE_KEYS, f"compare.{name}")
        if "schedulers" in raw:
            _section(SchedulersSpec, raw["schedulers"] or {}, f"compare.{name}.schedulers")
        _mapping(raw.get("controller_manager") or {}, f"compare.{name}.controller_manager")
        out[str(name)] = raw
    return out


def _pools(items: Any) -> tuple[dict[str, Any], ...]:
    if not isinstance(items, list):
        raise ScenarioError("cluster.node_pools: expected a list of node pools")
    for i, raw in enumerate(items):
        try:
            NodePool.from_dict(_mapping(raw, f"cluster.node_pools[{i}]"), f"cluster.node_pools[{i}]")
        except NodeConfigError as e:
            raise ScenarioError(str(e)) from None
    return tuple(dict(p) for p in items)


def _autoscaling(groups: Any, flags: Any) -> tuple[tuple[dict[str, Any], ...], dict[str, Any]]:
    """``cluster.node_groups`` and ``cluster.cluster_autoscaler``, by the autoscaler's own parsers."""
    from emulator.cloud.nodegroups import NodeGroupConfigError, parse_node_groups
    from emulator.clusterautoscaler.config import AutoscalingOptions, OptionsError

    try:
        parse_node_groups(groups, "cluster.node_groups")
        AutoscalingOptions.from_dict(_mapping(flags, "cluster.cluster_autoscaler"), "cluster.cluster_autoscaler")
    except (NodeGroupConfigError, OptionsError) as e:
        raise ScenarioError(str(e)) from None
    return tuple(dict(g) for g in groups), dict(flags)


def _priorities(items: Any) -> tuple[PriorityClassSpec, ...]:
    if not isinstance(items, list):
        raise ScenarioError("priorities: expected a list of {name, value, weight}")
    out: list[PriorityClassSpec] = []
    for i, raw in enumerate(items):
        where = f"priorities[{i}]"
        item = _mapping(raw, where)
        _no_unknown(item, {"name", "value", "weight"}, where)
        if not isinstance(item.get("name"), str) or not item["name"]:
            raise ScenarioError(f"{where}.name: expected a PriorityClass name")
        value = item.get("value", 0)
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) > 1_000_000_000:
            raise ScenarioError(f"{where}.value: expected an integer priority up to 1000000000, got {value!r}")
        out.append(PriorityClassSpec(item["name"], value, _float(item.get("weight", 1.0), f"{where}.weight")))
    if out and not sum(p.weight for p in out):
        raise ScenarioError("priorities: the weights must not all be 0")
    return tuple(out)


def _quantity(value: str, path: str) -> None:
    try:
        parse_quantity(value)
    except QuantityError as e:
        raise ScenarioError(f"{path}: {e}") from None


def _mapping(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: expected a mapping")
    return data


def _no_unknown(data: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in set(data) - known)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ScenarioError(f"unknown key {prefix}{unknown[0]} (known: {', '.join(sorted(known))})")


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScenarioError(f"{path}: expected an integer >= 0, got {value!r}")
    return value


def _signed_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(f"{path}: expected an integer, got {value!r}")
    return value


def _float(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ScenarioError(f"{path}: expected a number >= 0, got {value!r}")
    return float(value)


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(f"{path}: expected true or false, got {value!r}")
    return value


def _section(cls: type, data: Any, where: str, extra: dict[str, Any] | None = None) -> Any:
    """Validate a flat mapping into ``cls`` by the types of its defaults (nested values come in ``extra``)."""
    data = _mapping(data, where)
    extra = extra or {}
    _no_unknown(data, {f.name for f in fields(cls)} - set(extra), where)
    values: dict[str, Any] = dict(extra)
    defaults = {f.name: f.default for f in fields(cls)}
    for key, value in data.items():
        default = defaults[key]
        path = f"{where}.{key}"
        if isinstance(default, bool):
            values[key] = _bool(value, path)
        elif isinstance(default, float):
            values[key] = _float(value, path)
        elif isinstance(default, int):
            values[key] = _signed_int(value, path) if default < 0 else _int(value, path)
        elif isinstance(default, tuple):
            items = value if isinstance(value, list) else [value]
            values[key] = tuple(str(v) for v in items)
            if not values[key] and key in ("cpu", "memory"):
                raise ScenarioError(f"{path}: must not be empty")
        else:
            if isinstance(value, dict | list):
                raise ScenarioError(f"{path}: expected a single value, got a {type(value).__name__}")
            values[key] = str(value)
    return cls(**values)
