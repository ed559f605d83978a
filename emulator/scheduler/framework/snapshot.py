"""The cluster as the scheduler sees it in one cycle: node arrays plus the pods on each node.

Upstream keeps a map of ``NodeInfo`` structs (``pkg/scheduler/backend/cache/snapshot.go``)
and filters/scores them one by one in goroutines. kemu keeps the same facts
as columns -- one numpy array per quantity, one entry per node -- so a filter
or score over thousands of nodes is a handful of array operations:

==========================  ==============================================================
``allocatable(r)``          int64 per node: ``status.allocatable[r]`` (cpu in millicores)
``requested(r)``            int64 per node: sum of the requests of the node's pods
``nonzero_requested(r)``    cpu/memory with scoring defaults for request-less containers
``allowed_pods``            ``status.allocatable.pods``
``pod_counts``              pods on the node
``unschedulable``           ``spec.unschedulable``
``label_column(key)``       per node: code of the label's value (-1 = no such label)
``taint_groups()``          per node: index of its distinct taint list
``image(name)``             nodes that have an image, and its size
``port_conflicts(...)``     nodes where a host port is taken
``device_free()``           nodes x GPU device slots: free milli-GPU per device (absent: 0)
==========================  ==============================================================

Resource columns exist for every resource some node offers or some pod
requests; a column for a new extended resource (``nvidia.com/gpu``) appears
when the first node or pod names it. Per-node Python views
(:class:`~emulator.scheduler.framework.types.NodeInfo`) are built lazily from
the arrays, for plugins without a vectorised form.

**Purity.** A snapshot never touches a store. :meth:`with_pod`,
:meth:`without_pod` and :meth:`add_node` return *new* snapshots and leave the
original exactly as it was -- what a Cluster Autoscaler simulation ("would
these pods fit on one more node of group G?") needs. They are copy-on-write:
the new snapshot shares every array it does not change. :meth:`assume` and
:meth:`forget` change a snapshot in place, for the owner that places pods one
after another (a scheduler's cycle loop, a benchmark); they copy any array
still shared with another snapshot first, so they never disturb it.

Not in the snapshot (simplifications listed in ``docs/architecture.md``): nominated
pods, volume/PVC counts, node conditions other than ``spec.unschedulable``, pods of
nodes it does not hold.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from emulator.api.quantity import parse_quantity
from emulator.api.selectors import LabelSelector
from emulator.api.taints import Taint
from emulator.scheduler.framework.devices import DeviceTable, pod_gpu_request
from emulator.scheduler.framework.node_derived import LabelColumn, NodeDerived
from emulator.scheduler.framework.types import (
    CPU,
    EPHEMERAL_STORAGE,
    MEMORY,
    PODS,
    HostPort,
    HostPortInfo,
    ImageStateSummary,
    NodeInfo,
    PodInfo,
    tracked_resource,
)

__all__ = ["LabelColumn", "Snapshot", "Taint", "node_allocatable"]

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_BIND_ALL = "0.0.0.0"


def node_allocatable(node: Mapping[str, Any]) -> tuple[dict[str, int], int]:
    """A node's allocatable resources the scheduler tracks, and its pod capacity (upstream ``NewResource``).

    cpu is read in millicores and everything else in base units, both rounded
    up as ``Quantity.MilliValue``/``Value`` do; resources the scheduler does
    not account (``storage``, ...) are dropped.
    """
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    out: dict[str, int] = {}
    pods = 0
    for name, value in allocatable.items():
        quantity = parse_quantity(value)
        if name == CPU:
            out[name] = quantity.milli_value()
        elif name == PODS:
            pods = quantity.value()
        elif tracked_resource(name):
            out[name] = quantity.value()
    return out, pods


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


# (protocol, port) -> node index -> host IP -> number of pods using it there.
_PortIndex = dict[tuple[str, int], dict[int, dict[str, int]]]


class Snapshot:
    """An immutable-by-default, array-backed view of nodes and the pods bound to them. See the module docstring."""

    __slots__ = (
        "_alloc", "_alloc_dicts", "_allowed_pods", "_derived", "_devices", "_index", "_infos", "_labels", "_log",
        "_log_base", "_names", "_nodes", "_nz_cpu", "_nz_mem", "_owned", "_pod_count", "_pods", "_ports", "_req",
        "_unschedulable", "generation",
    )

    _alloc: dict[str, np.ndarray]
    _alloc_dicts: list[dict[str, int]]
    _allowed_pods: np.ndarray
    _derived: NodeDerived
    _devices: DeviceTable
    _index: dict[str, int]
    _infos: dict[int, NodeInfo]
    _labels: list[Mapping[str, str]]
    _log: list[int]
    _log_base: int
    _names: list[str]
    _nodes: list[Mapping[str, Any]]
    _nz_cpu: np.ndarray
    _nz_mem: np.ndarray
    _owned: set[Any]
    _pod_count: np.ndarray
    _pods: list[tuple[PodInfo, ...]]
    _ports: _PortIndex
    _req: dict[str, np.ndarray]
    _unschedulable: np.ndarray
    generation: int

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, nodes: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any] | PodInfo] = ()) -> Snapshot:
        """A snapshot of ``nodes`` with the non-terminal ``pods`` bound to them (``spec.nodeName``) accounted.

        Pods that are not bound, are Succeeded/Failed (the scheduler's pod
        informer excludes them) or name a node not in ``nodes`` are ignored.
        """
        snap = cls.__new__(cls)
        snap._nodes = list(nodes)
        snap._names = [(n.get("metadata") or {}).get("name") or "" for n in snap._nodes]
        snap._index = {}
        for i, name in enumerate(snap._names):
            if name in snap._index:
                raise ValueError(f"duplicate node name {name!r}")
            snap._index[name] = i
        snap._labels = [(n.get("metadata") or {}).get("labels") or {} for n in snap._nodes]
        n = len(snap._nodes)
        parsed = [node_allocatable(node) for node in snap._nodes]
        snap._alloc_dicts = [p[0] for p in parsed]
        snap._allowed_pods = _frozen(np.fromiter((p[1] for p in parsed), dtype=np.int64, count=n))
        snap._unschedulable = _frozen(np.fromiter(
            (bool((node.get("spec") or {}).get("unschedulable")) for node in snap._nodes), dtype=bool, count=n))
        names = {CPU: None, MEMORY: None, EPHEMERAL_STORAGE: None}
        for alloc in snap._alloc_dicts:
            names.update(dict.fromkeys(alloc))
        snap._alloc = {}
        for name in names:
            column = np.zeros(n, dtype=np.int64)
            for i, alloc in enumerate(snap._alloc_dicts):
                if name in alloc:
                    column[i] = alloc[name]
            snap._alloc[name] = _frozen(column)
        snap._req = {name: _frozen(np.zeros(n, dtype=np.int64)) for name in snap._alloc}
        snap._nz_cpu = _frozen(np.zeros(n, dtype=np.int64))
        snap._nz_mem = _frozen(np.zeros(n, dtype=np.int64))
        snap._pod_count = _frozen(np.zeros(n, dtype=np.int64))
        snap._pods = [()] * n
        snap._ports = {}
        snap._devices = DeviceTable.build(snap._alloc_dicts)
        snap._derived = NodeDerived(snap._nodes, snap._labels)
        snap._infos = {}
        snap._owned = set()
        snap.generation = 0
        snap._log = []
        snap._log_base = 0
        for pod in pods:
            info = PodInfo.of(pod)
            phase = (info.pod.get("status") or {}).get("phase")
            index = snap._index.get(info.node_name) if info.node_name else None
            if index is None or phase in _TERMINAL_PHASES:
                continue
            snap.assume(info, index)
        return snap

    def fork(self) -> Snapshot:
        """A new snapshot sharing everything with this one; later changes to either copy what they touch."""
        child = self._sharing_copy()
        self._owned = set()  # shared now: the next in-place change here must copy first
        return child

    def _sharing_copy(self) -> Snapshot:
        """A snapshot sharing this one's arrays, owning none, with an empty change log."""
        child = Snapshot.__new__(Snapshot)
        for name in Snapshot.__slots__:
            setattr(child, name, getattr(self, name))
        child._infos = {}
        child._owned = set()
        child._log = []
        child._log_base = child.generation
        return child

    def scratch(self) -> Snapshot:
        """A fork to try pods out on (``assume``/``forget``) while this snapshot does not change.

        Unlike :meth:`fork`, this snapshot keeps its arrays as its own: the scratch copy copies what it changes,
        but a later in-place change here would show through in it, so drop it before this snapshot changes.
        Costs this snapshot nothing (a :meth:`fork` makes its next ``assume`` copy five columns) -- for the
        nominated-pods pass, which adds a few nodes' nominated pods in every cycle while any are nominated.
        """
        return self._sharing_copy()

    def with_requested(self, requested: Mapping[str, np.ndarray], pod_counts: np.ndarray) -> Snapshot:
        """A fork whose requested columns (those in ``requested``) and pod counts are the given arrays, not copies.

        For vectorised what-if filtering (preemption's dry run) by plugins that read only node objects,
        requested resources and pod counts: the fork's pods, ports, devices and non-zero requests stay the
        original's. The caller may change the arrays between filter runs; never assume into this fork, and use
        it only while this snapshot does not change.
        """
        # Not fork(): that would make this snapshot copy its arrays before its next in-place change, on every
        # cycle that tries something out. The view is transient (used while this snapshot stands still) and
        # owns only the arrays it was given, so a change to it would copy the shared ones first.
        child = Snapshot.__new__(Snapshot)
        for name in Snapshot.__slots__:
            setattr(child, name, getattr(self, name))
        child._infos = {}
        child._log = []
        child._log_base = child.generation
        child._req = {**self._req, **requested}
        child._pod_count = pod_counts
        child._owned = {"req", "pod_count", *(("req", name) for name in requested)}
        return child

    # ------------------------------------------------------------------ pure "what if" operations
    def with_pod(self, pod: Mapping[str, Any] | PodInfo, node: int | str) -> Snapshot:
        """A new snapshot with ``pod`` running on ``node`` (index or name); this one is unchanged."""
        child = self.fork()
        child.assume(pod, node)
        return child

    def without_pod(self, pod: Mapping[str, Any] | PodInfo | str, node: int | str | None = None) -> Snapshot:
        """A new snapshot without ``pod`` (a pod, PodInfo or ``namespace/name`` key); this one is unchanged."""
        child = self.fork()
        child.forget(pod, node)
        return child

    def add_node(self, node: Mapping[str, Any], pods: Iterable[Mapping[str, Any] | PodInfo] = ()) -> Snapshot:
        """A new snapshot with one more node (a hypothetical node of a node group, say), and ``pods`` on it.

        The original snapshot is unchanged. Costs O(nodes): node-level
        indexes (labels, taints, images) are rebuilt lazily for the new one.
        """
        if (node.get("metadata") or {}).get("name") in self._index:
            raise ValueError(f"node {(node.get('metadata') or {}).get('name')!r} is already in the snapshot")
        child = self.fork()
        child._grow(node)
        index = child.num_nodes - 1
        for pod in pods:
            child.assume(pod, index)
        return child

    # ------------------------------------------------------------------ in-place changes (owner only)
    def assume(self, pod: Mapping[str, Any] | PodInfo, node: int | str) -> PodInfo:
        """Account ``pod`` on ``node`` in place (upstream ``NodeInfo.AddPod``); returns its PodInfo.

        For the snapshot's owner only; snapshots forked from this one are not
        affected (shared arrays are copied before the first change).
        """
        info = PodInfo.of(pod)
        i = self._node_index(node)
        for name, amount in info.requests.items():
            self._bump(("req", name), i, amount)
        self._bump(("nz", CPU), i, info.nonzero_cpu)
        self._bump(("nz", MEMORY), i, info.nonzero_memory)
        self._bump("pod_count", i, 1)
        pods = self._writable_pods()
        pods[i] = (*pods[i], info)
        for port in info.host_ports:
            self._change_port(i, port, +1)
        if pod_gpu_request(info):
            self._writable_devices().add(info, i)
        self._infos.pop(i, None)
        self._changed(i)
        return info

    def forget(self, pod: Mapping[str, Any] | PodInfo | str, node: int | str | None = None) -> PodInfo:
        """Remove a pod accounted on this snapshot, in place (upstream ``NodeInfo.RemovePod``); returns it.

        ``pod`` may be a pod, a PodInfo or a ``namespace/name`` key; the node
        is ``node`` if given, else the pod's ``spec.nodeName``, else found by
        a scan. ``KeyError`` if the pod is not in the snapshot.
        """
        if isinstance(pod, str):
            key = pod
        elif isinstance(pod, PodInfo):
            key = pod.key
        else:
            meta = pod.get("metadata") or {}
            key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
        if node is None and isinstance(pod, PodInfo):
            node = pod.node_name or None
        elif node is None and not isinstance(pod, str):
            node = (pod.get("spec") or {}).get("nodeName") or None
        candidates = [self._node_index(node)] if node is not None else range(self.num_nodes)
        for i in candidates:
            for pos, info in enumerate(self._pods[i]):
                if info.key == key:
                    return self._remove(i, pos, info)
        raise KeyError(f"pod {key!r} is not in the snapshot")

    def _remove(self, i: int, pos: int, info: PodInfo) -> PodInfo:
        for name, amount in info.requests.items():
            self._bump(("req", name), i, -amount)
        self._bump(("nz", CPU), i, -info.nonzero_cpu)
        self._bump(("nz", MEMORY), i, -info.nonzero_memory)
        self._bump("pod_count", i, -1)
        pods = self._writable_pods()
        pods[i] = pods[i][:pos] + pods[i][pos + 1:]
        for port in info.host_ports:
            self._change_port(i, port, -1)
        if info.key in self._devices.assign:
            self._writable_devices().remove(info.key)
        self._infos.pop(i, None)
        self._changed(i)
        return info

    _LOG_LIMIT = 65_536

    def _changed(self, i: int) -> None:
        """One more generation, in which node ``i``'s pods changed (see :meth:`changed_nodes_since`)."""
        self._log.append(i)
        self.generation += 1
        if len(self._log) > self._LOG_LIMIT:
            half = len(self._log) // 2
            del self._log[:half]
            self._log_base += half

    def columns_changed(self) -> None:
        """The requested columns or pod counts given to this view (:meth:`with_requested`) changed in place.

        A new generation whose changes are not logged: whoever keeps something
        derived from this object's pods or requests (indexes, bounds) starts
        over.
        """
        self.generation += 1
        self._log = []
        self._log_base = self.generation

    def changed_nodes_since(self, generation: int) -> list[int] | None:
        """The nodes whose pods changed (in place) since ``generation`` of this snapshot object, one entry per
        change (repeats possible), or None when that is not known: a generation before this object was forked,
        beyond a bounded log, or before the node set changed. For indexes over the pods (``PodIndex``)."""
        if not self._log_base <= generation <= self.generation:
            return None
        return self._log[generation - self._log_base:]

    # -- copy-on-write plumbing
    def _node_index(self, node: int | str) -> int:
        if isinstance(node, str):
            try:
                return self._index[node]
            except KeyError:
                raise KeyError(f"node {node!r} is not in the snapshot") from None
        if not 0 <= node < len(self._names):
            raise IndexError(f"node index {node} out of range")
        return int(node)

    def _array(self, key: Any) -> np.ndarray:
        if key == "pod_count":
            return self._pod_count
        kind, name = key
        if kind == "nz":
            return self._nz_cpu if name == CPU else self._nz_mem
        return self._req[name]

    def _store(self, key: Any, array: np.ndarray) -> None:
        if key == "pod_count":
            self._pod_count = array
            return
        kind, name = key
        if kind == "nz":
            if name == CPU:
                self._nz_cpu = array
            else:
                self._nz_mem = array
            return
        if "req" not in self._owned:  # the dict itself is shared with forks
            self._req = dict(self._req)
            self._owned.add("req")
        self._req[name] = array

    def _bump(self, key: Any, i: int, amount: int) -> None:
        if not amount:
            return
        if key[0] == "req" and key[1] not in self._req:
            self._add_resource_column(key[1])
        array = self._array(key)
        if key not in self._owned:
            array = array.copy()
            self._store(key, array)
            self._owned.add(key)
        array.flags.writeable = True
        array[i] += amount
        array.flags.writeable = False

    def _add_resource_column(self, name: str) -> None:
        """A column for a resource no node or pod named before (e.g. the first pod asking for ``example.com/foo``)."""
        n = self.num_nodes
        self._alloc = {**self._alloc, name: _frozen(np.zeros(n, dtype=np.int64))}
        self._store(("req", name), _frozen(np.zeros(n, dtype=np.int64)))
        self._owned.add(("req", name))

    def _writable_pods(self) -> list[tuple[PodInfo, ...]]:
        if "pods" not in self._owned:
            self._pods = list(self._pods)
            self._owned.add("pods")
        return self._pods

    def _writable_devices(self) -> DeviceTable:
        if "devices" not in self._owned:
            self._devices = self._devices.copy()
            self._owned.add("devices")
        return self._devices

    def _change_port(self, i: int, port: HostPort, delta: int) -> None:
        ip, protocol, number = port
        pp = (protocol, number)
        if "ports" not in self._owned:
            self._ports = dict(self._ports)
            self._owned.add("ports")
        by_node = dict(self._ports.get(pp, {}))
        by_ip = dict(by_node.get(i, {}))
        count = by_ip.get(ip, 0) + delta
        if count > 0:
            by_ip[ip] = count
        else:
            by_ip.pop(ip, None)
        if by_ip:
            by_node[i] = by_ip
        else:
            by_node.pop(i, None)
        if by_node:
            self._ports[pp] = by_node
        else:
            self._ports.pop(pp, None)

    def refresh_node(self, node: Mapping[str, Any]) -> bool:
        """Swap in a newer object of a node already here, in place, if its labels, spec and allocatable are unchanged.

        What else a node object carries - status images, annotations, conditions - reaches the
        plugins only through :meth:`node`, :meth:`image` / :meth:`image_states` and the node memo,
        so those are rebuilt lazily (a fresh image index and memo; the label columns and taint
        groups, which depend on labels and spec only, are kept). Pods, requests and ports stay, and
        so does ``generation`` (no pod moved: :class:`~emulator.scheduler.plugins.pod_index.PodIndex`
        stays incremental). This is the update upstream's cache makes per node event (``UpdateNode``
        replaces one ``NodeInfo``); without it a kubelet's image list or a usage annotation rebuilt
        every array and re-assumed every pod. Returns False (nothing changed) when the node is
        unknown or its labels, spec or allocatable differ: then only a rebuild is right.
        """
        meta = node.get("metadata") or {}
        i = self._index.get(meta.get("name") or "")
        if i is None:
            return False
        old = self._nodes[i]
        if (meta.get("labels") or {}) != self._labels[i] or node.get("spec") != old.get("spec") \
                or node_allocatable(node) != node_allocatable(old):
            return False
        nodes = list(self._nodes)  # forks keep the list they share
        nodes[i] = node
        self._nodes = nodes
        derived = NodeDerived(nodes, self._labels)
        derived.label_columns = self._derived.label_columns
        derived._taint_groups = self._derived._taint_groups
        self._derived = derived
        self._infos.pop(i, None)
        return True

    def _grow(self, node: Mapping[str, Any]) -> None:
        """Append ``node`` in place (on a fresh fork): every per-node structure gets one more entry."""
        alloc, pods = node_allocatable(node)
        name = (node.get("metadata") or {}).get("name") or ""
        self._nodes = [*self._nodes, node]
        self._names = [*self._names, name]
        self._index = {**self._index, name: len(self._names) - 1}
        self._labels = [*self._labels, (node.get("metadata") or {}).get("labels") or {}]
        self._alloc_dicts = [*self._alloc_dicts, alloc]
        self._allowed_pods = _frozen(np.append(self._allowed_pods, pods))
        cordoned = bool((node.get("spec") or {}).get("unschedulable"))
        self._unschedulable = _frozen(np.append(self._unschedulable, cordoned))
        columns = dict.fromkeys([*self._alloc, *alloc])
        self._alloc = {r: _frozen(np.append(self._alloc.get(r, np.zeros(self.num_nodes - 1, dtype=np.int64)),
                                            alloc.get(r, 0))) for r in columns}
        self._req = {r: _frozen(np.append(self._req.get(r, np.zeros(self.num_nodes - 1, dtype=np.int64)), 0))
                     for r in columns}
        self._nz_cpu = _frozen(np.append(self._nz_cpu, 0))
        self._nz_mem = _frozen(np.append(self._nz_mem, 0))
        self._pod_count = _frozen(np.append(self._pod_count, 0))
        self._pods = [*self._pods, ()]
        self._devices = self._devices.grow(alloc)
        self._derived = NodeDerived(self._nodes, self._labels)
        # Every array above is new and private to this snapshot.
        self._owned = {"req", "pods", "pod_count", ("nz", CPU), ("nz", MEMORY), "devices",
                       *(("req", r) for r in columns)}
        self.generation += 1
        self._log = []  # the node set changed: indexes over the pods must rebuild
        self._log_base = self.generation

    # ------------------------------------------------------------------ node axis
    @property
    def num_nodes(self) -> int:
        return len(self._names)

    def __len__(self) -> int:
        return len(self._names)

    @property
    def node_names(self) -> Sequence[str]:
        """Node names in snapshot order (index ``i`` is node ``i``); do not modify."""
        return self._names

    def index_of(self, name: str) -> int | None:
        return self._index.get(name)

    def node(self, index: int) -> Mapping[str, Any]:
        return self._nodes[index]

    def labels(self, index: int) -> Mapping[str, str]:
        return self._labels[index]

    # ------------------------------------------------------------------ resources
    @property
    def resource_names(self) -> tuple[str, ...]:
        """Resources with a column: cpu, memory, ephemeral-storage and every scalar resource seen."""
        return tuple(self._alloc)

    def allocatable(self, resource: str) -> np.ndarray:
        """int64 per node; zeros for a resource no node offers."""
        column = self._alloc.get(resource)
        return column if column is not None else _frozen(np.zeros(self.num_nodes, dtype=np.int64))

    def requested(self, resource: str) -> np.ndarray:
        """int64 per node: the summed requests of the pods on it."""
        column = self._req.get(resource)
        return column if column is not None else _frozen(np.zeros(self.num_nodes, dtype=np.int64))

    def nonzero_requested(self, resource: str) -> np.ndarray:
        """cpu or memory requested with scoring defaults (upstream ``NodeInfo.NonZeroRequested``)."""
        if resource == CPU:
            return self._nz_cpu
        if resource == MEMORY:
            return self._nz_mem
        raise ValueError(f"non-zero requests are tracked for cpu and memory only, not {resource!r}")

    @property
    def allowed_pods(self) -> np.ndarray:
        return self._allowed_pods

    @property
    def pod_counts(self) -> np.ndarray:
        return self._pod_count

    @property
    def unschedulable(self) -> np.ndarray:
        return self._unschedulable

    # ------------------------------------------------------------------ devices
    def device_capacity(self) -> np.ndarray:
        """int64 nodes x device slots: each GPU device's capacity in milli-GPU (0: the node has no such slot)."""
        return self._devices.capacity

    def device_free(self) -> np.ndarray:
        """int64 nodes x device slots: free milli-GPU per device (see :mod:`.devices`)."""
        return self._devices.free

    def device_ids(self, key: str) -> tuple[int, ...] | None:
        """The devices pod ``namespace/name`` holds in this snapshot (None: it holds none)."""
        entry = self._devices.assign.get(key)
        return entry[1] if entry is not None else None

    def reassign_devices(self, key: str, ids: tuple[int, ...]) -> bool:
        """Move an accounted pod to devices ``ids`` of its node, in place (a device plugin's Reserve)."""
        if key not in self._devices.assign:
            return False
        changed = self._writable_devices().reassign(key, ids)
        if changed:
            self._changed(self._devices.assign[key][0])
        return changed

    # ------------------------------------------------------------------ labels, taints, images, ports
    def label_column(self, key: str) -> LabelColumn:
        """Every node's value of label ``key`` as codes (built once per key, shared by forks)."""
        return self._derived.label_column(key)

    def taints(self, index: int) -> tuple[Taint, ...]:
        codes, groups = self._derived.taint_groups()
        return groups[codes[index]]

    def taint_groups(self) -> tuple[np.ndarray, tuple[tuple[Taint, ...], ...]]:
        """(group code per node, distinct taint lists): plugins decide once per distinct list."""
        return self._derived.taint_groups()

    def node_memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()``, remembered under ``key`` for as long as the node set is unchanged.

        For results that depend on node objects only -- labels, taints,
        images, names, ``spec.unschedulable`` -- never on pods or requests:
        the memo is shared by every snapshot forked from this one and by
        in-place ``assume``/``forget``, and dropped by :meth:`add_node`.
        ``key`` should start with the plugin's name; arrays put here must not
        be modified.
        """
        return self._derived.memoised(key, compute)

    def image(self, name: str) -> tuple[np.ndarray, int]:
        """Indices of the nodes that have image ``name`` (exact, already normalised) and its size."""
        images = self._derived.image_index()
        return images.nodes(name), images.size_of.get(name, 0)

    def image_mask(self, name: str) -> np.ndarray:
        """Bool per node: does the node have image ``name``."""
        return self._derived.memoised(("image-mask", name), lambda: _frozen(np.isin(
            np.arange(self.num_nodes), self._derived.image_index().nodes(name))))

    def image_states(self, index: int) -> dict[str, ImageStateSummary]:
        images = self._derived.image_index()
        return {name: ImageStateSummary(images.size_of[name], len(images.nodes_of[name]))
                for name in images.by_node[index]}

    def port_conflicts(self, ip: str, protocol: str, port: int) -> np.ndarray:
        """Bool per node: would a pod wanting host ``ip:port/protocol`` clash there (``HostPortInfo.CheckConflict``)."""
        mask = np.zeros(self.num_nodes, dtype=bool)
        by_node = self._ports.get((protocol or "TCP", port))
        if by_node and port > 0:
            ip = ip or _BIND_ALL
            hits = [i for i, by_ip in by_node.items() if ip == _BIND_ALL or _BIND_ALL in by_ip or ip in by_ip]
            mask[hits] = True
        return mask

    # ------------------------------------------------------------------ pods
    def pods_on(self, index: int) -> tuple[PodInfo, ...]:
        return self._pods[index]

    def iter_pods(self) -> Iterator[tuple[int, PodInfo]]:
        """Every (node index, pod) in the snapshot."""
        for i, pods in enumerate(self._pods):
            for info in pods:
                yield i, info

    def pods_matching(self, selector: LabelSelector,
                      namespaces: Iterable[str] | None = None) -> list[tuple[int, PodInfo]]:
        """(node index, pod) of the pods whose labels match ``selector``, optionally only in ``namespaces``."""
        allowed = None if namespaces is None else frozenset(namespaces)
        return [(i, info) for i, info in self.iter_pods()
                if (allowed is None or info.namespace in allowed) and selector.matches(info.labels)]

    def find_pod(self, key: str) -> tuple[int, PodInfo] | None:
        """The node index and PodInfo of pod ``namespace/name``, or None (a scan)."""
        for i, info in self.iter_pods():
            if info.key == key:
                return i, info
        return None

    @property
    def num_pods(self) -> int:
        return int(self._pod_count.sum())

    # ------------------------------------------------------------------ per-node views
    def node_info(self, index: int) -> NodeInfo:
        """The per-node view of node ``index`` (cached until the node changes)."""
        info = self._infos.get(index)
        if info is None:
            node_alloc = self._alloc_dicts[index]
            allocatable = {CPU: 0, MEMORY: 0, EPHEMERAL_STORAGE: 0, **node_alloc}
            requested = {CPU: 0, MEMORY: 0, EPHEMERAL_STORAGE: 0}
            for name, column in self._req.items():
                if column[index]:
                    requested[name] = int(column[index])
            pods = self._pods[index]
            ports: list[HostPort] = [port for pod in pods for port in pod.host_ports]
            info = self._infos[index] = NodeInfo(
                index=index, node=self._nodes[index], pods=pods, allocatable=allocatable,
                allowed_pod_number=int(self._allowed_pods[index]), requested=requested,
                nonzero_requested={CPU: int(self._nz_cpu[index]), MEMORY: int(self._nz_mem[index])},
                used_ports=HostPortInfo(ports), image_states=self.image_states(index),
                device_free=tuple(int(f) for f, c in zip(self._devices.free[index], self._devices.capacity[index],
                                                         strict=True) if c > 0))
        return info

    def node_info_with(self, index: int, pods: Sequence[PodInfo]) -> NodeInfo:
        """Node ``index``'s view with ``pods`` added, this snapshot unchanged (upstream ``nodeInfo.Snapshot()``
        then ``AddPodInfo`` for each): what an :meth:`assume` of each on a fork would show, at a cost in that
        node's pods, not in the cluster's columns."""
        if any(pod_gpu_request(pod) for pod in pods):  # which devices they take: the device table's decision
            scratch = self.scratch()
            for pod in pods:
                scratch.assume(pod, index)
            return scratch.node_info(index)
        base = self.node_info(index)
        requested = dict(base.requested)
        nz_cpu, nz_mem = base.nonzero_requested[CPU], base.nonzero_requested[MEMORY]
        for pod in pods:
            for name, amount in pod.requests.items():
                if amount:  # as assume: a zero request leaves the column (and so the view) as it was
                    requested[name] = requested.get(name, 0) + amount
            nz_cpu += pod.nonzero_cpu
            nz_mem += pod.nonzero_memory
        all_pods = (*base.pods, *pods)
        # Read-only views: shared with the node's own when the pods add nothing to them.
        ports = HostPortInfo([port for pod in all_pods for port in pod.host_ports]) \
            if any(pod.host_ports for pod in pods) else base.used_ports
        return NodeInfo(
            index=index, node=base.node, pods=all_pods, allocatable=base.allocatable,
            allowed_pod_number=base.allowed_pod_number, requested=requested,
            nonzero_requested={CPU: nz_cpu, MEMORY: nz_mem}, used_ports=ports,
            image_states=base.image_states, device_free=base.device_free)

    def __repr__(self) -> str:
        return f"Snapshot(nodes={self.num_nodes}, pods={self.num_pods}, generation={self.generation})"
