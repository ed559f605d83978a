"""The controller runtime: client-go's controller pieces and kube-controller-manager's shared code.

Every workload controller (ReplicaSet, Deployment, DaemonSet, Job, node
lifecycle, quotas ...) is built from the pieces here, one module per upstream
piece (our own Python, checked against the Go):

* :mod:`.ratelimiters` — client-go ``util/workqueue/default_rate_limiters.go``;
* :mod:`.workqueue` — ``queue.go`` + ``delaying_queue.go`` +
  ``rate_limiting_queue.go`` (and ``metrics.go``'s metric names);
* :mod:`.expectations` — ``pkg/controller/controller_utils.go`` expectations;
* :mod:`.controller_ref_manager` — ``pkg/controller/controller_ref_manager.go``
  and apimachinery's ``controller_ref.go``;
* :mod:`.events` — the event recorder, client-go ``tools/record``;
* :mod:`.controller` — the :class:`Controller` base (informer handlers → work
  queue → workers calling ``reconcile``) and the key/index/lookup helpers
  controllers share;
* :mod:`.wait` — waiting on the cluster clock (apimachinery ``pkg/util/wait``).

Controllers import the names below from ``emulator.controllers.runtime``;
nothing here imports a concrete controller (import-linter keeps controllers
independent of each other).

Time: every delay a controller asks for (back-off, ``add_after``, expectations
expiry) is cluster time from the injected clock (see :mod:`.wait`).
"""

from __future__ import annotations

from emulator.controllers.runtime.controller import (
    CONTROLLER_INDEX,
    Controller,
    ControllerContext,
    PodOwnerController,
    Runnable,
    SelectorCache,
    controller_index_func,
    deleted_key,
    ensure_indexers,
    meta_key,
    object_of,
    resolve_controller_ref,
    split_key,
)
from emulator.controllers.runtime.controller_ref_manager import (
    ControllerRefManager,
    get_controller_of,
    new_controller_ref,
    recheck_deletion_timestamp,
)
from emulator.controllers.runtime.events import EVENT_NORMAL, EVENT_WARNING, EventRecorder
from emulator.controllers.runtime.expectations import (
    EXPECTATIONS_TIMEOUT,
    ControlleeExpectations,
    ControllerExpectations,
    UIDTrackingControllerExpectations,
)
from emulator.controllers.runtime.ratelimiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)
from emulator.controllers.runtime.wait import wait_for, wait_until, wall_delay
from emulator.controllers.runtime.workqueue import LatencySamples, WorkQueue

__all__ = [
    "CONTROLLER_INDEX",
    "EVENT_NORMAL",
    "EVENT_WARNING",
    "EXPECTATIONS_TIMEOUT",
    "BucketRateLimiter",
    "ControlleeExpectations",
    "Controller",
    "ControllerContext",
    "ControllerExpectations",
    "ControllerRefManager",
    "EventRecorder",
    "ItemExponentialFailureRateLimiter",
    "LatencySamples",
    "MaxOfRateLimiter",
    "PodOwnerController",
    "RateLimiter",
    "Runnable",
    "SelectorCache",
    "UIDTrackingControllerExpectations",
    "WorkQueue",
    "controller_index_func",
    "default_controller_rate_limiter",
    "deleted_key",
    "ensure_indexers",
    "get_controller_of",
    "meta_key",
    "new_controller_ref",
    "object_of",
    "recheck_deletion_timestamp",
    "resolve_controller_ref",
    "split_key",
    "wait_for",
    "wait_until",
    "wall_delay",
]
