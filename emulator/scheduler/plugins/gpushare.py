"""GPUShare: a device-aware Filter and the Reserve that records a pod's GPU devices for the kubelet.

What a GPU-sharing scheduler plugin (open-gpu-share, the FGD simulator's
``GpuSharePlugin``) adds to NodeResourcesFit: per-node sums of
``alibabacloud.com/gpu-milli`` say a 500 milli-GPU pod fits a node with 400
free on each of two devices; it does not. Filter, per node:

* the pod's ``alibabacloud.com/gpu-card-model`` (openb's ``gpu_spec``) must
  name the node's ``alibabacloud.com/gpu-card-model`` label
  (UnschedulableAndUnresolvable);
* a share (``gpu-milli`` < 1000) needs **one device** with that much free,
  N whole GPUs need **N fully free devices** (Unschedulable; unresolvable
  when the node has fewer devices than asked).

PreFilter remembers the cycle's snapshot; Reserve picks the devices: the choice a GPU Score plugin recorded for this
node (see :mod:`.gpu_devices`; a share's device or whole GPUs' devices), else the tightest-fitting device or the
lowest-indexed fully free ones; it moves
the pod's charge in the framework's snapshot to them and asks the bind to
write ``alibabacloud.com/gpu-index`` on the pod (the annotation the kubelet's
device manager honours).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.api.gpu import (
    DEVICE_INDEX_ANNOTATION,
    GPU_MODEL_LABEL,
    MILLI,
    GPURequest,
    allocate,
    fits,
    format_device_ids,
)
from emulator.scheduler.framework.interface import (
    BINDING_ANNOTATIONS_KEY,
    Code,
    CycleState,
    FilterVerdict,
    Handle,
    PreFilterResult,
    Rejection,
    Status,
    add_binding_annotations,
    all_pass,
)
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeInfo, PodInfo
from emulator.scheduler.plugins.gpu_devices import CHOICE_KEY, CHOOSER_KEY, gpu_request_of

NAME = "GPUShare"
RESERVED_KEY = NAME + "/devices"
SNAPSHOT_KEY = NAME + "/snapshot"
ERR_MODEL = "node(s) didn't have the requested GPU model"


def _device_counts(snapshot: Snapshot) -> np.ndarray:
    """GPU devices per node (depends on the node objects only: memoised for the node set)."""
    return snapshot.node_memo((NAME, "devices"), lambda: (snapshot.device_capacity() > 0).sum(axis=1))


def _holds(free: np.ndarray, ids: tuple[int, ...], request: GPURequest) -> bool:
    """Can devices ``ids`` (distinct, on the node) take the request: the policy's choice is still valid."""
    return (len(ids) == request.count and len(set(ids)) == len(ids) and max(ids) < len(free)
            and bool((free[list(ids)] >= request.milli).all()))


def err_devices(count: int, milli: int) -> str:
    if count == 1 and milli < MILLI:
        return f"node(s) had no single GPU device with {milli} milli-GPU free"
    return f"node(s) had fewer than {count} fully free GPU devices"


class GPUShare:
    """Filter on per-device room and GPU model; Reserve the devices and annotate the binding."""

    name = NAME

    def __init__(self, handle: Handle | None = None) -> None:
        self.handle = handle

    # -- PreFilter / Filter -----------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        # Reserve reads the devices of the snapshot this cycle ran on (a scheduler sets no handle snapshot).
        state.write(SNAPSHOT_KEY, snapshot)
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict:
        request = gpu_request_of(pod)
        if not request and not request.models:
            return all_pass(snapshot.num_nodes)
        reasons = []
        failed = np.zeros(snapshot.num_nodes, dtype=bool)
        if request.models:
            wrong = snapshot.node_memo((NAME, "wrong-model", request.models), lambda: ~snapshot.label_column(
                GPU_MODEL_LABEL).mask(lambda v: v in request.models, absent=False))
            if wrong.any():
                reasons.append(Rejection(ERR_MODEL, wrong, Code.UNSCHEDULABLE_AND_UNRESOLVABLE))
                failed = failed | wrong
        if request:
            free = snapshot.device_free()
            if request.error:
                room = np.zeros(snapshot.num_nodes, dtype=bool)
            elif request.shared:
                room = free.max(axis=1, initial=0) >= request.milli  # one device with the share free
            else:
                room = fits(free, request)
            short = ~room & ~failed
            if short.any():
                # Fewer devices than asked: no placement of other pods helps (unresolvable, as upstream's
                # "Insufficient" becomes when the node's capacity is below the request).
                too_few = np.ones(snapshot.num_nodes, dtype=bool) if request.error else \
                    _device_counts(snapshot) < request.count
                reasons.append(Rejection(request.error or err_devices(request.count, request.milli), short,
                                         unresolvable=too_few))
                failed = failed | short
        return FilterVerdict(~failed, tuple(reasons))

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        request = gpu_request_of(pod)
        if request.models and node.labels.get(GPU_MODEL_LABEL) not in request.models:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_MODEL)
        if not request:
            return None
        free = np.asarray([list(node.device_free)], dtype=np.int64).reshape(1, len(node.device_free))
        if fits(free, request)[0]:
            return None
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if request.error or len(node.device_free) < request.count \
            else Code.UNSCHEDULABLE
        return Status(code, request.error or err_devices(request.count, request.milli))

    # -- Reserve ---------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        request = gpu_request_of(pod)
        if not request:
            return None
        own = self.handle.snapshot() if self.handle is not None else None
        snapshot = own if own is not None else state.get(SNAPSHOT_KEY)
        if snapshot is None:
            return None  # no snapshot to pick from: the kubelet's device manager chooses
        index = snapshot.index_of(node_name)
        if index is None:
            return None
        held = snapshot.device_ids(pod.key)
        free = snapshot.device_free()[index]
        if held is not None:  # assumed already: its own charge is not room taken from it
            free = free.copy()
            free[list(held)] += request.milli
        choice = state.get(CHOICE_KEY)
        chosen = choice.get(index) if choice is not None else None
        chooser = state.get(CHOOSER_KEY)
        if chosen is None and chooser is not None:
            # Scoring was skipped (one feasible node): ask the policy for this node, without the pod's own charge.
            chosen = chooser(pod, snapshot.without_pod(pod.key, index) if held is not None else snapshot, index)
        count = int((snapshot.device_capacity()[index] > 0).sum())
        valid = chosen is not None and _holds(free[:count], chosen, request)
        ids = chosen if valid else allocate(free[:count], request)
        if ids is None:
            return Status(Code.UNSCHEDULABLE, err_devices(request.count, request.milli), plugin=NAME)
        if held is not None and tuple(held) != ids and snapshot is own:
            # Only the framework's own snapshot (a bench, a simulation) is moved here; a scheduler's cache
            # re-places the pod when the informer brings it back bound with the annotation.
            snapshot.reassign_devices(pod.key, ids)
        state.write(RESERVED_KEY, ids)
        add_binding_annotations(state, {DEVICE_INDEX_ANNOTATION: format_device_ids(ids)})
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        state.delete(RESERVED_KEY)
        annotations = dict(state.get(BINDING_ANNOTATIONS_KEY) or {})
        if annotations.pop(DEVICE_INDEX_ANNOTATION, None) is not None:
            state.write(BINDING_ANNOTATIONS_KEY, annotations)


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> GPUShare:
    return GPUShare(handle)
