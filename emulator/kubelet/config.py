"""Kubelet shard configuration: the ``kubelet`` and ``node_pools`` config keys as one frozen value.

Upstream counterpart: ``pkg/kubelet/apis/config/types.go`` (``KubeletConfiguration``:
nodeLeaseDurationSeconds, nodeStatusUpdateFrequency, nodeStatusReportFrequency,
serializeImagePulls, nodeStatusMaxImages, kubeReserved, systemReserved ...), plus kemu's own
knobs (image sizes, pull bandwidth, write batching) and the node pools a shard registers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from emulator.api.quantity import to_int
from emulator.api.selectors import parse_label_selector
from emulator.kubelet import nodes as nd
from emulator.kubelet.model import KubeletConfig

__all__ = ["KubeletShardConfig", "kubelet_shard_config"]


@dataclass(frozen=True)
class KubeletShardConfig:
    """What every kubelet shard of a cluster is configured with (the ``kubelet`` and ``node_pools`` config keys)."""

    pools: tuple[nd.NodePool, ...] = ()
    node_selector: str = ""  # label selector of the nodes kemu runs kubelets for ("": all)
    kube_reserved: Mapping[str, str] = field(default_factory=dict)  # kubeReserved
    system_reserved: Mapping[str, str] = field(default_factory=dict)  # systemReserved
    model: KubeletConfig = field(default_factory=KubeletConfig)  # eviction thresholds, profiles seed, back-off...
    profile_paths: tuple[str, ...] = ()  # extra profile files or directories
    tick_interval: float = 1.0  # cluster seconds between ticks (the shell's loop)
    lease_duration_seconds: int = 40  # nodeLeaseDurationSeconds
    node_status_update_frequency: float = 10.0  # nodeStatusUpdateFrequency
    node_status_report_frequency: float = 300.0  # nodeStatusReportFrequency
    # The status manager's full reconcile with the store (pkg/kubelet/status/status_manager.go syncPeriod).
    status_sync_period: float = 10.0
    image_sizes: Mapping[str, str | int] = field(default_factory=dict)  # image reference -> size
    default_image_size: str | int = "100Mi"
    pull_bandwidth: str | int = "50Mi"  # bytes per second
    pull_latency: float = 0.5  # seconds per pull besides the transfer (registry round trips, unpacking)
    present_image_check: float = 0.2  # imagePullPolicy Always with the image present
    serialize_image_pulls: bool = True  # serializeImagePulls
    max_images: int = 50  # nodeStatusMaxImages
    init_duration: str = "1s"  # run time of an ordinary init container without kemu.io/init-duration
    termination_delay: str = "0s"  # how long an app takes to stop on SIGTERM (kemu.io/termination-delay)
    events: str = "all"  # all | warnings | none
    event_burst: int = 25
    event_refill_seconds: float = 300.0
    metrics_window: float = 15.0  # metrics.k8s.io resolution (metrics-server's default)
    write_batch: int = 1000  # objects per pipelined round trip
    # New pods admitted per tick; the rest wait for the next tick. Bounds a tick's work when thousands of
    # pods arrive at once, so heartbeats and the other pods' updates stay on time (upstream the pod
    # workers run beside the heartbeat; here one thread does both).
    max_admissions_per_tick: int = 2000

    @property
    def renew_interval(self) -> float:
        # nodelease: renewInterval = leaseDuration * 0.25 (pkg/kubelet/kubelet.go).
        return self.lease_duration_seconds * 0.25


_MODEL_KEYS = {"seed", "default_profile", "memory_qos", "memory_throttling_factor", "pod_pids_limit", "eviction_hard",
               "eviction_soft", "eviction_soft_grace_period", "eviction_pressure_transition_period",
               "backoff_initial", "backoff_max"}


def kubelet_shard_config(kubelet: Mapping[str, Any] | None = None,
                         pools: Iterable[Mapping[str, Any] | nd.NodePool] = ()) -> KubeletShardConfig:
    """Build the config from plain data (YAML): ``kubelet`` settings and a list of node pools.

    Keys of :class:`KubeletShardConfig` and of :class:`~emulator.kubelet.model.KubeletConfig`
    (``seed``, ``eviction_hard`` ...) may be mixed in ``kubelet``; ``-`` and ``_`` are the same.
    """
    values = {str(k).replace("-", "_"): v for k, v in (kubelet or {}).items()}
    model_values = {k: values.pop(k) for k in list(values) if k in _MODEL_KEYS}
    model = replace(KubeletConfig(), **model_values) if model_values else KubeletConfig()
    pool_list = tuple(p if isinstance(p, nd.NodePool) else nd.NodePool.from_dict(p, f"node pool {i}")
                      for i, p in enumerate(pools))
    nd.check_unique_pool_names(pool_list)
    known = {f for f in KubeletShardConfig.__dataclass_fields__ if f not in ("pools", "model")}
    unknown = sorted(set(values) - known)
    if unknown:
        raise nd.NodeConfigError(f"kubelet: unknown key(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(sorted(known | _MODEL_KEYS))}")
    if "profile_paths" in values:
        values["profile_paths"] = tuple(str(p) for p in values["profile_paths"] or ())
    cfg = KubeletShardConfig(pools=pool_list, model=model, **values)
    if cfg.events not in ("all", "warnings", "none"):
        raise nd.NodeConfigError("kubelet: events must be all, warnings or none")
    parse_label_selector(cfg.node_selector)
    if to_int(cfg.pull_bandwidth) <= 0:
        raise nd.NodeConfigError("kubelet: pull_bandwidth must be positive")
    return cfg
