"""The scheduling framework's contract: result codes, per-cycle state and one small interface per extension point.

This is kube-scheduler's framework API (upstream
``staging/src/k8s.io/kube-scheduler/framework/interface.go`` and
``cycle_state.go``) in Python. Plugins import this module, :mod:`.types`
and :mod:`.snapshot`, never the runtime that drives them.

Design:

* **Expected outcomes are values, not exceptions.** Every plugin method
  answers a :class:`Status` (or ``None``, which means Success exactly as a nil
  ``*Status`` does upstream). Exceptions are left for bugs; a plugin that hits
  an unexpected condition returns ``Status(Code.ERROR, ...)``.
* **One protocol per extension point** (:class:`FilterPlugin`,
  :class:`ScorePlugin`, ...). A plugin is any object with a ``name`` and the
  methods of the points it serves; the runtime discovers the points by the
  method names in :data:`EXTENSION_POINTS`, the way upstream uses Go interface
  assertions.
* **Vectorised variants.** Filtering and scoring thousands of nodes one
  Python call at a time costs ~150 µs per thousand nodes; the same work over
  node arrays costs a few µs. So a Filter plugin *may* also implement
  ``filter_all(state, pod, snapshot) -> FilterVerdict`` (a boolean mask over
  every node of the snapshot, plus the reasons for the rejected ones) and a
  Score plugin ``score_all(state, pod, snapshot, nodes) -> int64 array``. The
  runtime uses them when present and falls back to the per-node methods,
  which every plugin must still provide: they are the reference semantics and
  what tests compare the vectorised forms against.
* Pods reach plugins as :class:`~emulator.scheduler.framework.types.PodInfo`
  (the pod dict plus pre-computed requests, ports, images...), nodes as
  :class:`~emulator.scheduler.framework.types.NodeInfo` views or, vectorised,
  as indices into a :class:`~emulator.scheduler.framework.snapshot.Snapshot`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

if TYPE_CHECKING:
    from emulator.scheduler.framework.snapshot import Snapshot
    from emulator.scheduler.framework.types import NodeInfo, NodeToStatus, PodInfo, QueuedPodInfo

__all__ = [
    "BINDING_ANNOTATIONS_KEY",
    "EXTENSION_POINTS",
    "MAX_NODE_SCORE",
    "MAX_TOTAL_SCORE",
    "MIN_NODE_SCORE",
    "BindPlugin",
    "Code",
    "CycleState",
    "FilterPlugin",
    "FilterVerdict",
    "Handle",
    "NominatingInfo",
    "NormalizeScorePlugin",
    "PermitPlugin",
    "Plugin",
    "PostBindPlugin",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreFilterResult",
    "PreScorePlugin",
    "QueueSortPlugin",
    "Rejection",
    "ReservePlugin",
    "ScorePlugin",
    "Status",
    "VectorFilterPlugin",
    "VectorScorePlugin",
    "add_binding_annotations",
    "all_pass",
    "as_status",
    "implements",
    "is_success",
    "reject_where",
]

# interface.go: the range every Score plugin's normalised score must fall in.
MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
MAX_TOTAL_SCORE = 2**63 - 1


class Code(IntEnum):
    """Status codes, in upstream's order (the names are what ``str(code)`` prints upstream)."""

    SUCCESS = 0
    ERROR = 1  # internal plugin error, unexpected input: the pod is retried after backoff
    UNSCHEDULABLE = 2  # rejected; preemption (PostFilter) may help
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3  # rejected; preemption cannot help
    WAIT = 4  # Permit: hold the pod
    SKIP = 5  # PreFilter/PreScore: skip the coupled Filter/Score; Bind: let the next binder try
    PENDING = 6  # the cycle stops successfully but waits for something external

    def __str__(self) -> str:
        return _CODE_NAMES[self]


_CODE_NAMES = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}

_REJECTED = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


class Status:
    """The result of running a plugin: a code, reasons, an optional error and the plugin that produced it.

    ``None`` is Success everywhere a ``Status | None`` is accepted, as a nil
    ``*Status`` is upstream; :func:`is_success` and :func:`as_status` treat
    both alike.
    """

    __slots__ = ("code", "err", "plugin", "reasons")

    def __init__(self, code: Code = Code.SUCCESS, *reasons: str, err: BaseException | None = None,
                 plugin: str = "") -> None:
        self.code = code
        self.reasons: list[str] = list(reasons)
        self.err = err
        self.plugin = plugin

    @classmethod
    def error(cls, err: BaseException | str, plugin: str = "") -> Status:
        """upstream ``AsStatus(err)``: code Error carrying the error."""
        exc = err if isinstance(err, BaseException) else RuntimeError(err)
        return cls(Code.ERROR, err=exc, plugin=plugin)

    def all_reasons(self) -> list[str]:
        """upstream ``Reasons()``: the error's text first, then the reasons."""
        if self.err is not None:
            return [str(self.err), *self.reasons]
        return list(self.reasons)

    @property
    def message(self) -> str:
        """upstream ``Message()``: the reasons joined by ", "."""
        return ", ".join(self.all_reasons())

    def with_plugin(self, plugin: str) -> Status:
        self.plugin = plugin
        return self

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_rejected(self) -> bool:
        """Unschedulable, UnschedulableAndUnresolvable or Pending (upstream ``IsRejected``)."""
        return self.code in _REJECTED

    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    def is_wait(self) -> bool:
        return self.code == Code.WAIT

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Status):
            return NotImplemented
        return (self.code, self.reasons, str(self.err) if self.err else None, self.plugin) == (
            other.code, other.reasons, str(other.err) if other.err else None, other.plugin)

    __hash__ = None  # type: ignore[assignment]  # mutable, like upstream's *Status

    def __repr__(self) -> str:
        plugin = f", plugin={self.plugin!r}" if self.plugin else ""
        return f"Status({self.code}, {self.all_reasons()!r}{plugin})"

    def __str__(self) -> str:
        return self.message


def is_success(status: Status | None) -> bool:
    """A nil-or-Success check, as upstream's ``(*Status).IsSuccess`` on a nil pointer."""
    return status is None or status.code == Code.SUCCESS


def as_status(status: Status | None) -> Status:
    """Turn ``None`` into an explicit Success status."""
    return status if status is not None else Status(Code.SUCCESS)


class CycleState:
    """Data plugins share during one scheduling cycle (upstream ``CycleState``).

    PreFilter/PreScore write pod-level pre-computations under their own key
    and the later points read them; ``skip_filter_plugins`` /
    ``skip_score_plugins`` record the plugins whose PreFilter/PreScore
    answered Skip. Values may implement ``clone()``; :meth:`clone` calls it so
    that preemption's "what if" copies do not share mutable state.
    """

    __slots__ = ("_data", "record_plugin_metrics", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: frozenset[str] = frozenset()
        self.skip_score_plugins: frozenset[str] = frozenset()
        self.record_plugin_metrics = False

    def read(self, key: str) -> Any:
        """The value stored under ``key``; ``KeyError`` when absent (upstream ``ErrNotFound``)."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def clone(self) -> CycleState:
        copy = CycleState()
        copy._data = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in self._data.items()}
        copy.skip_filter_plugins = self.skip_filter_plugins
        copy.skip_score_plugins = self.skip_score_plugins
        copy.record_plugin_metrics = self.record_plugin_metrics
        return copy


# CycleState key of the annotations the binding writes on the pod (upstream: a Binding's
# ObjectMeta.Annotations, which the pods/binding subresource copies onto the pod). Reserve/PreBind
# plugins that choose something the node must honour -- GPU devices -- put it there.
BINDING_ANNOTATIONS_KEY = "kemu.io/binding-annotations"


def add_binding_annotations(state: CycleState, annotations: Mapping[str, str]) -> None:
    """Have the bind write ``annotations`` on the pod (merged with what other plugins added)."""
    state.write(BINDING_ANNOTATIONS_KEY, {**(state.get(BINDING_ANNOTATIONS_KEY) or {}), **annotations})


@dataclass(frozen=True)
class PreFilterResult:
    """Nodes a PreFilter plugin allows; ``node_names=None`` means all (upstream ``PreFilterResult``)."""

    node_names: frozenset[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult | None:
        """Intersection of the two allowed sets; ``None`` (all nodes) when both allow all."""
        mine = self.node_names
        theirs = other.node_names if other is not None else None
        if mine is None and theirs is None:
            return None
        if mine is None:
            return PreFilterResult(theirs)
        if theirs is None:
            return PreFilterResult(mine)
        return PreFilterResult(mine & theirs)


@dataclass(frozen=True)
class NominatingInfo:
    """Where a PostFilter plugin (preemption) wants the pod nominated."""

    nominated_node_name: str = ""
    override: bool = False  # upstream ModeOverride (True) vs ModeNoop (False)


@dataclass(frozen=True)
class PostFilterResult:
    nominating_info: NominatingInfo | None = None


# -- vectorised filter results ----------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Rejection:
    """One reason a vectorised filter rejects nodes.

    ``mask`` (bool, one entry per snapshot node) marks the nodes this reason
    applies to; a node's Status lists, in order, the reasons whose masks cover
    it. Its code is UnschedulableAndUnresolvable when any covering rejection
    has that code or marks the node in ``unresolvable`` (NodeResourcesFit:
    the request exceeds the node's whole allocatable), else ``code``.
    """

    reason: str
    mask: np.ndarray
    code: Code = Code.UNSCHEDULABLE
    unresolvable: np.ndarray | None = None


class FilterVerdict(NamedTuple):
    """What ``filter_all`` answers: ``mask[i]`` is True when node ``i`` passes; ``reasons`` explain the rest.

    ``passes_all`` marks a verdict known to reject nothing (see
    :func:`all_pass`), which lets the runtime skip it.
    """

    mask: np.ndarray
    reasons: tuple[Rejection, ...] = ()
    passes_all: bool = False

    def status_for(self, index: int, plugin: str) -> Status:
        """The Status the per-node Filter would give node ``index`` (which must be rejected)."""
        reasons = [r.reason for r in self.reasons if r.mask[index]]
        code = Code.UNSCHEDULABLE
        for r in self.reasons:
            if r.mask[index] and (r.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                                  or (r.unresolvable is not None and r.unresolvable[index])):
                code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                break
        return Status(code, *reasons, plugin=plugin)


def all_pass(num_nodes: int) -> FilterVerdict:
    """A verdict that lets every node through.

    Shared per cluster size (most plugins pass every node for most pods,
    every cycle): its mask is read-only.
    """
    verdict = _ALL_PASS.get(num_nodes)
    if verdict is None:
        if len(_ALL_PASS) >= 16:
            _ALL_PASS.clear()
        mask = np.ones(num_nodes, dtype=bool)
        mask.flags.writeable = False
        verdict = _ALL_PASS[num_nodes] = FilterVerdict(mask, (), True)
    return verdict


_ALL_PASS: dict[int, FilterVerdict] = {}


def reject_where(failed: np.ndarray, reason: str, code: Code = Code.UNSCHEDULABLE) -> FilterVerdict:
    """The common single-reason verdict: nodes in ``failed`` are rejected for ``reason``."""
    return FilterVerdict(~failed, (Rejection(reason, failed, code),))


# -- the handle plugins get at construction --------------------------------------------------


class Handle(Protocol):
    """What the framework offers plugins besides their method arguments (upstream ``framework.Handle``).

    Kept small on purpose: the snapshot arrives as a method argument, so a
    plugin can run over any snapshot (the scheduler's own, or a Cluster
    Autoscaler simulation's) without reaching back into the framework.
    """

    @property
    def profile_name(self) -> str: ...

    def snapshot(self) -> Snapshot | None: ...


# -- one protocol per extension point ----------------------------------------------------------


class Plugin(Protocol):
    """Every plugin has a name, used in configuration, statuses and metrics."""

    @property
    def name(self) -> str: ...


class PreEnqueuePlugin(Plugin, Protocol):
    """Gate before the pod enters activeQ/backoffQ; non-success keeps it out."""

    def pre_enqueue(self, pod: Mapping[str, Any]) -> Status | None: ...


class QueueSortPlugin(Plugin, Protocol):
    """Orders the scheduling queue; exactly one per profile."""

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool: ...


class PreFilterExtensions(Protocol):
    """Incremental updates of PreFilter state when preemption adds/removes pods from a node."""

    def add_pod(self, state: CycleState, pod: PodInfo, pod_to_add: PodInfo, node: NodeInfo) -> Status | None: ...

    def remove_pod(self, state: CycleState, pod: PodInfo, pod_to_remove: PodInfo,
                   node: NodeInfo) -> Status | None: ...


class PreFilterPlugin(Plugin, Protocol):
    """Pod-level pre-computation (into CycleState) and optional node pre-selection."""

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]: ...

    def pre_filter_extensions(self) -> PreFilterExtensions | None: ...


class FilterPlugin(Plugin, Protocol):
    """Can ``pod`` run on this node? Success, or a rejection with reasons."""

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None: ...


class VectorFilterPlugin(FilterPlugin, Protocol):
    """A Filter plugin that can also judge every node of a snapshot at once."""

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict | Status: ...


class PostFilterPlugin(Plugin, Protocol):
    """Runs when no node fits (preemption lives here)."""

    def post_filter(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                    node_to_status: NodeToStatus) -> tuple[PostFilterResult | None, Status | None]: ...


class PreScorePlugin(Plugin, Protocol):
    """Pod-level pre-computation for scoring; ``nodes`` are the feasible nodes' snapshot indices."""

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                  nodes: np.ndarray) -> Status | None: ...


class ScorePlugin(Plugin, Protocol):
    """Ranks a feasible node. Scores outside 0..100 must be brought into range by ``normalize_score``."""

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]: ...


class VectorScorePlugin(ScorePlugin, Protocol):
    """A Score plugin that can also score many nodes (snapshot indices ``nodes``) at once."""

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                  nodes: np.ndarray) -> np.ndarray | Status: ...


class NormalizeScorePlugin(ScorePlugin, Protocol):
    """upstream ``ScoreExtensions.NormalizeScore``: rewrite ``scores`` (aligned with the nodes) in place."""

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None: ...


class ReservePlugin(Plugin, Protocol):
    """Claims per-node resources a plugin tracks itself; ``unreserve`` must undo it and be idempotent."""

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


class PermitPlugin(Plugin, Protocol):
    """Approve, deny or hold (Wait, with a timeout in seconds) the pod before binding."""

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]: ...


class PreBindPlugin(Plugin, Protocol):
    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...


class BindPlugin(Plugin, Protocol):
    """Binds the pod; Skip passes the pod to the next bind plugin."""

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None: ...


class PostBindPlugin(Plugin, Protocol):
    """Informational, after a successful bind."""

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


# Extension point (as named in KubeSchedulerConfiguration) -> the method that makes a plugin serve it.
EXTENSION_POINTS: Mapping[str, str] = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "less",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
}


def implements(plugin: object, point: str) -> bool:
    """Whether ``plugin`` serves extension point ``point`` (a key of :data:`EXTENSION_POINTS`)."""
    return callable(getattr(plugin, EXTENSION_POINTS[point], None))

