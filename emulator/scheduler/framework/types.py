"""The framework's data types: pods and nodes as plugins see them, and what a failed cycle reports.

Upstream counterparts (``pkg/scheduler/framework/types.go`` unless noted):

* :class:`PodInfo` -- ``PodInfo`` plus ``PodResource``: the pod dict and what
  every cycle would otherwise recompute from it (requests, the "non-zero"
  requests scoring uses, host ports, images, tolerations). Built once per pod
  (:meth:`PodInfo.of`); plugins may memoise their own parsed views of the pod
  in it with :meth:`PodInfo.memo`.
* :class:`NodeInfo` -- a read-only per-node view the per-node plugin methods
  receive. The snapshot holds the truth in arrays; a ``NodeInfo`` is built
  from them on demand, so the per-node and vectorised paths read the same
  numbers.
* :class:`HostPortInfo` -- ``HostPortInfo`` (used host ports by IP).
* :class:`NodeToStatus`, :class:`Diagnosis`, :class:`FitError` -- why a pod
  did not fit, with ``FitError``'s message byte-for-byte upstream's.

Amounts are ints in kemu's units: millicores for ``cpu``, base units (bytes,
devices, counts) otherwise, as :func:`emulator.api.pods.pod_requests` gives
them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from emulator.api.pods import HostPort, container_requests, host_ports, is_extended_resource, pod_requests
from emulator.scheduler.framework.interface import Code, FilterVerdict, NominatingInfo, Status

if TYPE_CHECKING:
    from emulator.scheduler.framework.snapshot import Snapshot

__all__ = [
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "Diagnosis",
    "FitError",
    "HostPort",
    "HostPortInfo",
    "ImageStateSummary",
    "NoNodesAvailable",
    "NodeInfo",
    "NodeScores",
    "NodeToStatus",
    "PodInfo",
    "QueuedPodInfo",
    "ScheduleResult",
    "SchedulingError",
    "is_scalar_resource",
    "normalized_image_name",
    "tracked_resource",
]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# pkg/scheduler/util/pod_resources.go: what scoring assumes a container without a
# cpu/memory request uses, so that request-less pods do not all pile onto one node.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_DEFAULT_REQUEST_TEXT = {CPU: "100m", MEMORY: str(DEFAULT_MEMORY_REQUEST)}


def is_scalar_resource(name: str) -> bool:
    """upstream ``schedutil.IsScalarResourceName``: extended, hugepages-*, *kubernetes.io/* or attachable-volumes-*."""
    return (
        name.startswith(("hugepages-", "attachable-volumes-"))
        or "kubernetes.io/" in name
        or is_extended_resource(name)
    )


def tracked_resource(name: str) -> bool:
    """Whether the scheduler accounts ``name`` (upstream ``Resource.Add``): cpu, memory, ephemeral-storage, scalars."""
    return name in (CPU, MEMORY, EPHEMERAL_STORAGE) or is_scalar_resource(name)


def normalized_image_name(name: str) -> str:
    """imagelocality ``normalizedImageName``: a reference without a tag gets ``:latest``."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


_BIND_ALL = "0.0.0.0"


def _nonzero_cpu_memory(pod: Mapping[str, Any], requests: Mapping[str, int]) -> tuple[int, int]:
    """cpu and memory requests with upstream's defaults for containers that do not request them.

    ``PodRequests`` with ``NonMissingContainerRequests`` (component-helpers
    ``resource/helpers.go``): a container whose requests (after limits are
    copied into missing requests) lack cpu or memory counts 100m / 200Mi for
    it; an explicit ``0`` is kept. The arithmetic is delegated to
    :func:`pod_requests` on a copy of the pod whose containers carry the
    defaults, so init containers, sidecars and overhead combine exactly as
    for real requests.
    """
    spec = pod.get("spec") or {}
    patched: dict[str, list[Any]] = {}
    for kind in ("containers", "initContainers"):
        containers = spec.get(kind) or ()
        out = []
        changed = False
        for container in containers:
            have = container_requests(container)
            missing = {name: text for name, text in _DEFAULT_REQUEST_TEXT.items() if name not in have}
            if not missing:
                out.append(container)
                continue
            changed = True
            resources = dict(container.get("resources") or {})
            resources["requests"] = {**(resources.get("requests") or {}), **missing}
            out.append({**container, "resources": resources})
        if changed:
            patched[kind] = out
    if not patched:
        return requests.get(CPU, 0), requests.get(MEMORY, 0)
    totals = pod_requests({**pod, "spec": {**spec, **patched}})
    return totals.get(CPU, 0), totals.get(MEMORY, 0)


class PodInfo:
    """A pod plus the values every scheduling cycle needs from it, computed once.

    ``requests`` holds the scheduler-tracked resources with positive requests
    (upstream ``computePodResourceRequest``); ``nonzero_cpu`` /
    ``nonzero_memory`` are the scoring requests with defaults for missing
    ones (``PodResource.Non0CPU`` / ``Non0Mem``). The instance is shared by
    every snapshot the pod is placed in, so it never records a node.
    """

    __slots__ = (
        "affinity", "host_ports", "images", "key", "labels", "memo_cache", "name", "namespace",
        "node_name", "node_selector", "nominated_node_name", "nonzero_cpu", "nonzero_memory", "pod",
        "priority", "requests", "tolerations", "uid",
    )

    def __init__(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.pod = pod
        self.namespace: str = meta.get("namespace") or ""
        self.name: str = meta.get("name") or ""
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = meta.get("uid") or ""
        self.labels: Mapping[str, str] = meta.get("labels") or {}
        self.priority: int = int(spec.get("priority") or 0)
        self.node_name: str = spec.get("nodeName") or ""
        self.nominated_node_name: str = (pod.get("status") or {}).get("nominatedNodeName") or ""
        all_requests = pod_requests(pod)
        self.requests: dict[str, int] = {k: v for k, v in all_requests.items() if v > 0 and tracked_resource(k)}
        self.nonzero_cpu, self.nonzero_memory = _nonzero_cpu_memory(pod, all_requests)
        self.host_ports = host_ports(pod)
        # ImageLocality counts init containers first, then app containers (imagelocality.sumImageScores).
        self.images: tuple[str, ...] = tuple(
            c.get("image") or "" for kind in ("initContainers", "containers") for c in spec.get(kind) or ())
        self.tolerations: tuple[Mapping[str, Any], ...] = tuple(spec.get("tolerations") or ())
        self.node_selector: Mapping[str, str] = spec.get("nodeSelector") or {}
        self.affinity: Mapping[str, Any] | None = spec.get("affinity")
        self.memo_cache: dict[str, Any] = {}

    @classmethod
    def of(cls, pod: Mapping[str, Any] | PodInfo) -> PodInfo:
        return pod if isinstance(pod, PodInfo) else cls(pod)

    def memo(self, key: str, compute: Callable[[PodInfo], Any]) -> Any:
        """A plugin's parsed view of this pod, computed on first use (the pod spec is immutable while queued)."""
        try:
            return self.memo_cache[key]
        except KeyError:
            value = self.memo_cache[key] = compute(self)
            return value

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


@dataclass
class QueuedPodInfo:
    """A pod in the scheduling queue (upstream ``QueuedPodInfo``); ``timestamp`` is when it was queued."""

    pod_info: PodInfo
    timestamp: float = 0.0
    attempts: int = 0
    initial_attempt_timestamp: float | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gating_plugin: str = ""


class HostPortInfo:
    """Host ports in use on one node: IP -> {(protocol, port)} (upstream ``HostPortInfo``)."""

    __slots__ = ("_by_ip",)

    def __init__(self, ports: Sequence[HostPort] = ()) -> None:
        self._by_ip: dict[str, set[tuple[str, int]]] = {}
        for ip, protocol, port in ports:
            self.add(ip, protocol, port)

    def add(self, ip: str, protocol: str, port: int) -> None:
        if port <= 0:
            return
        self._by_ip.setdefault(ip or _BIND_ALL, set()).add((protocol or "TCP", port))

    def check_conflict(self, ip: str, protocol: str, port: int) -> bool:
        """Whether (ip, protocol, port) clashes: 0.0.0.0 clashes with any IP, any IP with itself and 0.0.0.0."""
        if port <= 0:
            return False
        ip, pp = ip or _BIND_ALL, (protocol or "TCP", port)
        if ip == _BIND_ALL:
            return any(pp in used for used in self._by_ip.values())
        return any(pp in self._by_ip.get(key, ()) for key in (_BIND_ALL, ip))

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_ip.values())

    def items(self) -> Iterator[tuple[str, frozenset[tuple[str, int]]]]:
        for ip, used in self._by_ip.items():
            yield ip, frozenset(used)


@dataclass(frozen=True)
class ImageStateSummary:
    """An image on a node: its size and how many snapshot nodes have it (upstream ``ImageStateSummary``)."""

    size: int
    num_nodes: int


class NodeInfo:
    """A read-only view of one node of a :class:`Snapshot`, for per-node plugin methods.

    ``allocatable`` / ``requested`` map resource name -> amount (cpu in
    millicores); ``nonzero_requested`` has the scoring view of cpu/memory
    (requests with defaults for request-less containers).
    """

    __slots__ = (
        "allocatable", "allowed_pod_number", "device_free", "image_states", "index", "labels", "name", "node",
        "nonzero_requested", "pods", "requested", "taints", "unschedulable", "used_ports",
    )

    def __init__(self, *, index: int, node: Mapping[str, Any], pods: tuple[PodInfo, ...],
                 allocatable: dict[str, int], allowed_pod_number: int, requested: dict[str, int],
                 nonzero_requested: dict[str, int], used_ports: HostPortInfo,
                 image_states: dict[str, ImageStateSummary], device_free: tuple[int, ...] = ()) -> None:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        self.index = index
        self.node = node
        self.name: str = meta.get("name") or ""
        self.labels: Mapping[str, str] = meta.get("labels") or {}
        self.taints: tuple[Mapping[str, Any], ...] = tuple(spec.get("taints") or ())
        self.unschedulable = bool(spec.get("unschedulable"))
        self.pods = pods
        self.allocatable = allocatable
        self.allowed_pod_number = allowed_pod_number
        self.requested = requested
        self.nonzero_requested = nonzero_requested
        self.used_ports = used_ports
        self.image_states = image_states
        self.device_free = device_free  # free milli-GPU per GPU device (Snapshot.device_free's row)

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"


# -- why a pod did not fit ----------------------------------------------------------------------


def attribute_rejections(failed: np.ndarray,
                         verdicts: list[tuple[str, FilterVerdict]]) -> list[tuple[str, np.ndarray, FilterVerdict]]:
    """Split the rejected nodes ``failed`` by the first verdict (in profile order) that rejects each of them."""
    if len(verdicts) == 1:
        name, verdict = verdicts[0]
        return [(name, failed, verdict)]
    passed = np.stack([verdict.mask[failed] for _, verdict in verdicts])
    first = np.argmin(passed, axis=0)  # index of the first False in each column
    return [(name, failed[first == t], verdict) for t, (name, verdict) in enumerate(verdicts)]


class NodeToStatus:
    """The status of every rejected node, plus one shared status for nodes never evaluated.

    Upstream ``NodeToStatus``. Statuses come in two forms: explicit
    :class:`Status` objects from per-node filters, and groups of nodes a
    vectorised filter rejected, kept as (plugin, node indices, verdict) and
    turned into ``Status`` objects only when someone asks -- a FitError over
    20,000 nodes then costs a few array sums, not 20,000 objects. Which
    vectorised plugin rejected a node first is itself worked out only when
    read (:meth:`add_pending`): a pod that gets scheduled never needs it.
    """

    __slots__ = ("_explicit", "_groups", "_pending", "_snapshot", "absent_status")

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._explicit: dict[int, Status] = {}
        self._groups: list[tuple[str, np.ndarray, FilterVerdict]] = []
        self._pending: tuple[np.ndarray, list[tuple[str, FilterVerdict]]] | None = None
        self.absent_status: Status | None = None

    def set(self, index: int, status: Status) -> None:
        """Record node ``index``'s status; like upstream's map, a later status replaces an earlier one."""
        self._resolve()
        self._drop_from_groups(np.asarray([index]))
        self._explicit[index] = status

    def add_pending(self, failed: np.ndarray, verdicts: list[tuple[str, FilterVerdict]]) -> None:
        """Nodes ``failed`` were rejected by (at least one of) the vectorised ``verdicts``, in profile order."""
        if not len(failed):
            return
        if self._explicit or self._groups or self._pending is not None:
            self.add_groups(attribute_rejections(failed, verdicts))
        else:
            self._pending = (failed, verdicts)

    def _resolve(self) -> None:
        if self._pending is not None:
            failed, verdicts = self._pending
            self._pending = None
            self.add_groups(attribute_rejections(failed, verdicts))

    def rejecting_plugins(self) -> set[str]:
        """Plugins that rejected at least one node through a vectorised verdict."""
        self._resolve()
        return {plugin for plugin, _, _ in self._groups}

    def add_groups(self, groups: list[tuple[str, np.ndarray, FilterVerdict]]) -> None:
        """Several disjoint groups at once; they replace any status recorded earlier for their nodes."""
        groups = [(plugin, np.sort(indices), verdict) for plugin, indices, verdict in groups if len(indices)]
        if not groups:
            return
        self._resolve()
        if self._explicit or self._groups:  # only when a node was judged twice (the nominated node)
            new = np.concatenate([indices for _, indices, _ in groups])
            if self._explicit:  # look up the few explicit nodes among the new, not each new one
                explicit = np.fromiter(self._explicit, dtype=np.intp, count=len(self._explicit))
                for index in explicit[np.isin(explicit, new)].tolist():
                    del self._explicit[index]
            self._drop_from_groups(new)
        # Sorted indices, so that looking one node up is a binary search.
        self._groups.extend(groups)

    def _drop_from_groups(self, indices: np.ndarray) -> None:
        if self._groups:
            self._groups = [(plugin, kept, verdict) for plugin, group, verdict in self._groups
                            if len(kept := np.setdiff1d(group, indices, assume_unique=True))]

    def __len__(self) -> int:
        """Nodes with an explicit status (upstream ``Len``); absent nodes are not counted."""
        pending = len(self._pending[0]) if self._pending is not None else 0
        return len(self._explicit) + sum(len(idx) for _, idx, _ in self._groups) + pending

    def get(self, node_name: str) -> Status | None:
        """The node's status, the absent-nodes status if it has none (upstream ``Get``)."""
        index = self._snapshot.index_of(node_name)
        if index is not None:
            status = self._status_at(index)
            if status is not None:
                return status
        return self.absent_status

    def _status_at(self, index: int) -> Status | None:
        self._resolve()
        if index in self._explicit:
            return self._explicit[index]
        for plugin, indices, verdict in self._groups:
            pos = np.searchsorted(indices, index)
            if pos < len(indices) and indices[pos] == index:
                return verdict.status_for(index, plugin)
        return None

    def items(self) -> Iterator[tuple[str, Status]]:
        """Every explicitly rejected node with its status (materialises vectorised groups)."""
        self._resolve()
        names = self._snapshot.node_names
        for index, status in self._explicit.items():
            yield names[index], status
        for plugin, indices, verdict in self._groups:
            for index in indices.tolist():
                yield names[index], verdict.status_for(index, plugin)

    def codes(self) -> dict[int, Code]:
        """Snapshot index -> status code of every explicitly rejected node (what preemption selects on)."""
        self._resolve()
        out = {index: status.code for index, status in self._explicit.items()}
        for plugin, indices, verdict in self._groups:
            for index in indices.tolist():
                out[index] = verdict.status_for(index, plugin).code
        return out

    def code_array(self) -> np.ndarray:
        """int8 per snapshot node: the code of its status (as :meth:`codes`), -1 where it has none.

        Vectorised over the groups a vectorised filter rejected, so preemption picking its potential nodes
        among thousands costs a few array operations, not a Status per node.
        """
        self._resolve()
        out = np.full(self._snapshot.num_nodes, -1, dtype=np.int8)
        for index, status in self._explicit.items():
            out[index] = int(status.code)
        for _, indices, verdict in self._groups:
            unresolvable = np.zeros(len(indices), dtype=bool)
            for rejection in verdict.reasons:
                covered = rejection.mask[indices]
                if rejection.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    unresolvable |= covered
                elif rejection.unresolvable is not None:
                    unresolvable |= covered & rejection.unresolvable[indices]
            out[indices] = np.where(unresolvable, int(Code.UNSCHEDULABLE_AND_UNRESOLVABLE), int(Code.UNSCHEDULABLE))
        return out

    def reason_counts(self) -> Counter[str]:
        """How many explicitly rejected nodes gave each reason (a node may give several)."""
        self._resolve()
        counts: Counter[str] = Counter()
        for status in self._explicit.values():
            counts.update(status.all_reasons())
        for _, indices, verdict in self._groups:
            for rejection in verdict.reasons:
                n = int(np.count_nonzero(rejection.mask[indices]))
                if n:
                    counts[rejection.reason] += n
        return counts


@dataclass
class Diagnosis:
    """What went wrong in a cycle (upstream ``Diagnosis``)."""

    node_to_status: NodeToStatus
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""

    def finalise(self) -> Diagnosis:
        """Fold the plugins behind vectorised rejections into ``unschedulable_plugins``."""
        self.unschedulable_plugins |= self.node_to_status.rejecting_plugins()
        return self

    def add_plugin_status(self, status: Status) -> None:
        """Record the plugin behind a rejection (upstream ``AddPluginStatus``)."""
        if not status.plugin:
            return
        if status.is_rejected():
            self.unschedulable_plugins.add(status.plugin)
        if status.code == Code.PENDING:
            self.pending_plugins.add(status.plugin)


class FitError(Exception):
    """No node fits the pod; returned by ``schedule_one`` (raise it if you prefer).

    ``str(error)`` is upstream's ``FitError.Error()``::

        0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint {k: v}. <postfilter msg>

    -- reasons counted over nodes, printed ``"<count> <reason>"`` and sorted
    as strings (so ``"10 x"`` sorts before ``"2 y"``, as in Go); a PreFilter
    rejection replaces the histogram with its own message.
    """

    def __init__(self, pod: PodInfo, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis.finalise()
        self.nominating_info: NominatingInfo | None = None

    @property
    def message(self) -> str:
        d = self.diagnosis
        msg = f"0/{self.num_all_nodes} nodes are available:"
        if d.pre_filter_msg:
            msg += f" {d.pre_filter_msg}."
        else:
            counts = d.node_to_status.reason_counts()
            absent = self.num_all_nodes - len(d.node_to_status)
            if absent > 0 and d.node_to_status.absent_status is not None:
                for reason in d.node_to_status.absent_status.all_reasons():
                    counts[reason] += absent
            histogram = sorted(f"{count} {reason}" for reason, count in counts.items())
            if histogram:
                msg += f" {', '.join(histogram)}."
        if d.post_filter_msg:
            msg += f" {d.post_filter_msg}"
        return msg

    def __str__(self) -> str:
        return self.message


class NoNodesAvailable(FitError):
    """The snapshot has no nodes at all (upstream ``ErrNoNodesAvailable``)."""

    @property
    def message(self) -> str:
        return "no nodes available to schedule pods"


class SchedulingError(Exception):
    """A plugin or the framework failed unexpectedly (an Error status); carries the status."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message)
        self.status = status


@dataclass(frozen=True)
class NodeScores:
    """Scores of the feasible nodes (upstream ``NodePluginScores``): ``totals[t]`` is for snapshot node ``nodes[t]``.

    ``plugin_scores`` holds each plugin's normalised (unweighted) scores,
    ``weights`` the weights that made the totals.
    """

    nodes: np.ndarray
    totals: np.ndarray
    plugin_scores: Mapping[str, np.ndarray]
    weights: Mapping[str, int]


@dataclass(frozen=True)
class ScheduleResult:
    """Where the pod goes (upstream ``ScheduleResult``); ``node_index`` indexes the snapshot it was scheduled on."""

    node: str
    node_index: int
    evaluated: int
    feasible: int
