"""Emulated nodes as data: instance types, node pools, allocatable, the Node object a kubelet registers.

A kubelet shard (:mod:`emulator.kubelet.shard`) hosts two kinds of nodes, and
both end up as the same Node object:

* **pool nodes**, described in configuration (``kemu up --nodes N`` is one
  pool of N nodes; a pool file or the ``node_pools`` config key gives any
  number): a name prefix, a count, an instance type (capacity), zones (round
  robin), labels, taints and pre-pulled images. Node ``i`` of pool ``p`` is
  ``<p.name>-<i:05d>``; the shard that owns that name (by its hash, see
  :meth:`emulator.store.store.Store.shard_of`) registers it.
* **adopted nodes**: Node objects created through the API
  (``kubectl apply -f node.yaml``, as with KWOK). :func:`complete_node` keeps
  everything the manifest gives - capacity, allocatable, labels, taints,
  images, addresses - and fills in only what is missing.

Capacity comes from the instance type (:data:`INSTANCE_TYPES`, overridable
per pool); allocatable follows the kubelet's node allocatable formula
(``pkg/kubelet/cm/node_container_manager_linux.go``
``GetNodeAllocatableReservation``)::

    allocatable = capacity - kube-reserved - system-reserved - hard eviction threshold

where the eviction threshold counts for memory (``memory.available``) and
ephemeral storage (``nodefs.available``, a percentage of capacity), as
upstream. The defaults are upstream's KubeletConfiguration defaults: nothing
reserved, ``memory.available<100Mi``, ``nodefs.available<10%``.

The registered object follows ``pkg/kubelet/kubelet_node_status.go``
(``initialNode`` and the status setters in ``pkg/kubelet/nodestatus``):
well-known labels (``kubernetes.io/hostname``, ``kubernetes.io/os``,
``kubernetes.io/arch``, ``node.kubernetes.io/instance-type``,
``topology.kubernetes.io/zone`` / ``region``), ``spec.podCIDR`` (upstream
the node IPAM controller assigns it; kemu's kubelet does, see
:func:`pod_cidr`), addresses, ``daemonEndpoints``, ``nodeInfo`` and the four
conditions. Pool nodes register already Ready - one write instead of two;
upstream a kubelet's first status update follows its registration within
seconds.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from emulator.api.quantity import Format, Quantity, QuantityError, cpu_millis, format_bytes, parse_quantity, to_int
from emulator.api.types import Obj
from emulator.kubelet import eviction as ev
from emulator.kubelet.devicemanager import advertised_capacity

KUBELET_VERSION = "v1.32.0"
CONTAINER_RUNTIME_VERSION = "containerd://1.7.22"
KUBELET_PORT = 10250
# Labels the kubelet sets (staging/src/k8s.io/api/core/v1/well_known_labels.go).
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_OS = "kubernetes.io/os"
LABEL_ARCH = "kubernetes.io/arch"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"
# Marks the nodes kemu registered from a pool (adopted nodes do not get it).
LABEL_POOL = "kemu.io/node-pool"

DEFAULT_INSTANCE_TYPE = "m5.2xlarge"
_BASE = {"pods": "110", "ephemeral-storage": "100Gi"}
# Capacity per instance type (cloud-like names so scenarios read naturally; memory as the OS sees it).
INSTANCE_TYPES: dict[str, dict[str, str]] = {
    "m5.large": {"cpu": "2", "memory": "8Gi", **_BASE},
    "m5.xlarge": {"cpu": "4", "memory": "16Gi", **_BASE},
    "m5.2xlarge": {"cpu": "8", "memory": "32Gi", **_BASE},
    "m5.4xlarge": {"cpu": "16", "memory": "64Gi", **_BASE, "pods": "234"},
    "m5.8xlarge": {"cpu": "32", "memory": "128Gi", **_BASE, "pods": "234"},
    "c5.xlarge": {"cpu": "4", "memory": "8Gi", **_BASE},
    "c5.2xlarge": {"cpu": "8", "memory": "16Gi", **_BASE},
    "c5.4xlarge": {"cpu": "16", "memory": "32Gi", **_BASE, "pods": "234"},
    "r5.xlarge": {"cpu": "4", "memory": "32Gi", **_BASE},
    "r5.2xlarge": {"cpu": "8", "memory": "64Gi", **_BASE},
    "g4dn.xlarge": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1", **_BASE},
    "p3.2xlarge": {"cpu": "8", "memory": "61Gi", "nvidia.com/gpu": "1", **_BASE},
    "p3.8xlarge": {"cpu": "32", "memory": "244Gi", "nvidia.com/gpu": "4", **_BASE, "pods": "234"},
}

POOL_CIDR_BASE = 0  # pool node i gets 10.(i>>8 & 127).(i & 255).0/24: 32,768 nodes
ADOPTED_CIDR_BASE = 128  # adopted nodes without a podCIDR hash into 10.128.0.0/9


class NodeConfigError(ValueError):
    """A node pool or node setting is invalid; the message names the key."""


@dataclass(frozen=True)
class NodePool:
    """``count`` nodes named ``<name>-00000`` ... with one shape (see the module docstring)."""

    name: str = "node"
    count: int = 0
    instance_type: str = DEFAULT_INSTANCE_TYPE
    capacity: Mapping[str, str] = field(default_factory=dict)  # overrides the instance type's
    zones: tuple[str, ...] = ("zone-a", "zone-b", "zone-c")
    region: str = "region-1"
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Mapping[str, str], ...] = ()
    # Images present from the start: image reference -> size (quantity text or bytes).
    images: Mapping[str, str | int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "node pool") -> NodePool:
        known = {"name", "count", "instance_type", "capacity", "zones", "region", "labels", "annotations", "taints",
                 "images"}
        values = {k.replace("-", "_"): v for k, v in data.items()}
        unknown = sorted(set(values) - known)
        if unknown:
            raise NodeConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        try:
            pool = cls(name=str(values.get("name", "node")), count=int(values.get("count", 0)),
                       instance_type=str(values.get("instance_type", DEFAULT_INSTANCE_TYPE)),
                       capacity={str(k): str(v) for k, v in (values.get("capacity") or {}).items()},
                       zones=tuple(str(z) for z in (values.get("zones") or ("zone-a", "zone-b", "zone-c"))),
                       region=str(values.get("region", "region-1")),
                       labels={str(k): str(v) for k, v in (values.get("labels") or {}).items()},
                       annotations={str(k): str(v) for k, v in (values.get("annotations") or {}).items()},
                       taints=tuple(dict(t) for t in values.get("taints") or ()),
                       images=dict(values.get("images") or {}))
        except (TypeError, ValueError, AttributeError) as e:
            raise NodeConfigError(f"{where}: {e}") from None
        pool.validate(where)
        return pool

    def validate(self, where: str = "node pool") -> None:
        if self.count < 0:
            raise NodeConfigError(f"{where}: count must not be negative")
        if self.instance_type not in INSTANCE_TYPES and not self.capacity:
            raise NodeConfigError(f"{where}: unknown instance_type {self.instance_type!r} and no capacity given; "
                                  f"known: {', '.join(sorted(INSTANCE_TYPES))}")
        if not self.zones:
            raise NodeConfigError(f"{where}: zones must not be empty")
        for name, value in self.full_capacity().items():
            try:
                parse_quantity(value)
            except QuantityError:
                raise NodeConfigError(f"{where}: capacity {name}: {value!r} is not a quantity") from None
        for taint in self.taints:
            if not taint.get("key") or taint.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                raise NodeConfigError(f"{where}: taint {dict(taint)!r} needs a key and an effect "
                                      "(NoSchedule, PreferNoSchedule or NoExecute)")

    def full_capacity(self) -> dict[str, str]:
        base = dict(INSTANCE_TYPES.get(self.instance_type, _BASE))
        base.update(self.capacity)
        return base

    def node_name(self, i: int) -> str:
        return f"{self.name}-{i:05d}"


def pool_nodes(pools: Sequence[NodePool]) -> Iterator[tuple[NodePool, int, int]]:
    """(pool, index in the pool, index over all pools) for every pool node, in order."""
    ordinal = 0
    for pool in pools:
        for i in range(pool.count):
            yield pool, i, ordinal
            ordinal += 1


def check_unique_pool_names(pools: Sequence[NodePool]) -> None:
    seen: set[str] = set()
    for pool in pools:
        if pool.name in seen:
            raise NodeConfigError(f"node pool name {pool.name!r} is used twice")
        seen.add(pool.name)


# -- quantities -----------------------------------------------------------------------------------------


def format_cpu(millis: int) -> str:
    """Millicores as the API prints them: ``8000`` -> ``"8"``, ``7900`` -> ``"7900m"``."""
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def resource_amount(name: str, value: Any) -> int:
    """A resource quantity in the units node accounting uses (cpu: millicores; the rest: whole units)."""
    return cpu_millis(value) if name == "cpu" else to_int(value)


def format_amount(name: str, amount: int) -> str:
    if name == "cpu":
        return format_cpu(amount)
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        return format_bytes(amount)
    return str(Quantity(Decimal(amount), Format.DECIMAL_SI).canonical())


def allocatable(capacity: Mapping[str, Any], *, kube_reserved: Mapping[str, Any] | None = None,
                system_reserved: Mapping[str, Any] | None = None,
                eviction_hard: Iterable[ev.Threshold] = ()) -> dict[str, str]:
    """Node allocatable from capacity (``GetNodeAllocatableReservation``), as quantity strings."""
    reserved: dict[str, int] = {}
    for source in (kube_reserved or {}, system_reserved or {}):
        for name, value in source.items():
            reserved[name] = reserved.get(name, 0) + resource_amount(name, value)
    cap = {name: resource_amount(name, value) for name, value in capacity.items()}
    for threshold in eviction_hard:
        resource = {ev.MEMORY_AVAILABLE: "memory", ev.NODEFS_AVAILABLE: "ephemeral-storage"}.get(threshold.signal)
        if resource is None or resource not in cap:
            continue
        if threshold.percentage is not None:
            amount = int(cap[resource] * threshold.percentage)
        else:
            amount = int(threshold.quantity or 0)
        reserved[resource] = reserved.get(resource, 0) + amount
    return {name: format_amount(name, max(0, amount - reserved.get(name, 0))) for name, amount in cap.items()}


# -- addresses ----------------------------------------------------------------------------------------


def pod_cidr(ordinal: int | None, name: str) -> str:
    """The node's pod CIDR: pool node ``ordinal`` gets its own /24; others hash into a second range.

    Hashed CIDRs may collide between adopted nodes (pod IPs are informational in kemu: no
    network is emulated); set ``spec.podCIDR`` in the manifest to choose one.
    """
    if ordinal is not None and ordinal < 32768:
        return f"10.{POOL_CIDR_BASE + ((ordinal >> 8) & 127)}.{ordinal & 255}.0/24"
    h = zlib.crc32(name.encode()) & 0x7FFF
    return f"10.{ADOPTED_CIDR_BASE + ((h >> 8) & 127)}.{h & 255}.0/24"


def internal_ip(name: str, ordinal: int | None) -> str:
    """The node's InternalIP (172.16.0.0/12, by pool ordinal or name hash): informational, never routed.

    254 hosts per /24 (no .0 or .255): pool ordinals up to ~1M get distinct addresses.
    """
    n = ordinal if ordinal is not None else (zlib.crc32(name.encode()) % 1_000_000)
    block, host = divmod(n, 254)
    return f"172.{16 + ((block >> 8) & 15)}.{block & 255}.{host + 1}"


def _uuid_of(name: str, salt: str) -> str:
    h = hashlib.blake2b(f"{salt}/{name}".encode(), digest_size=16).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def node_info(name: str) -> Obj:
    """``status.nodeInfo`` (stable per node name, so a re-registration reports the same machine)."""
    return {"machineID": hashlib.blake2b(name.encode(), digest_size=16).hexdigest(),
            "systemUUID": _uuid_of(name, "system"), "bootID": _uuid_of(name, "boot"),
            "kernelVersion": "6.1.0-kemu", "osImage": "kemu emulated node (Debian GNU/Linux 12)",
            "containerRuntimeVersion": CONTAINER_RUNTIME_VERSION, "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": KUBELET_VERSION, "operatingSystem": "linux", "architecture": "amd64"}


# -- images ---------------------------------------------------------------------------------------------


def normalize_image(image: str) -> str:
    """A reference with its tag defaulted (``nginx`` -> ``nginx:latest``), as the scheduler's ImageLocality does."""
    if "@" in image:
        return image
    return image if image.rfind(":") > image.rfind("/") else image + ":latest"


def qualified_image(image: str) -> str:
    """The fully qualified reference containerd reports (``nginx:1.27`` -> ``docker.io/library/nginx:1.27``)."""
    ref = normalize_image(image)
    first, slash, _rest = ref.partition("/")
    if not slash:
        return f"docker.io/library/{ref}"
    if "." in first or ":" in first or first == "localhost":
        return ref
    return f"docker.io/{ref}"


def image_digest(image: str) -> str:
    """A stable fake digest per image reference (``<repo>@sha256:<hex>``), used as imageID."""
    ref = qualified_image(image)
    repo = ref.split("@", 1)[0]
    if repo.rfind(":") > repo.rfind("/"):
        repo = repo[: repo.rfind(":")]
    return f"{repo}@sha256:{hashlib.sha256(ref.encode()).hexdigest()}"


def image_entry(image: str, size: int) -> Obj:
    """One ``status.images`` entry: the digest, the qualified name and the name as pods write it."""
    names = [image_digest(image), qualified_image(image)]
    norm = normalize_image(image)
    if norm not in names:
        names.append(norm)
    return {"names": names, "sizeBytes": int(size)}


# -- the Node object ------------------------------------------------------------------------------------


def new_pool_node(pool: NodePool, index: int, ordinal: int, *, allocatable_of: Any) -> Obj:
    """The Node a kubelet registers for pool node ``index`` (``allocatable_of(capacity)`` computes allocatable)."""
    name = pool.node_name(index)
    zone = pool.zones[index % len(pool.zones)]
    labels = {LABEL_ARCH: "amd64", LABEL_OS: "linux", LABEL_HOSTNAME: name, LABEL_INSTANCE_TYPE: pool.instance_type,
              LABEL_ZONE: zone, LABEL_REGION: pool.region, "beta.kubernetes.io/arch": "amd64",
              "beta.kubernetes.io/os": "linux", LABEL_POOL: pool.name, **pool.labels}
    annotations = {"node.alpha.kubernetes.io/ttl": "0",
                   "volumes.kubernetes.io/controller-managed-attach-detach": "true", **pool.annotations}
    capacity = advertised_capacity(pool.full_capacity())  # the GPU device plugin adds its sharing resource
    cidr = pod_cidr(ordinal, name)
    spec: Obj = {"podCIDR": cidr, "podCIDRs": [cidr], "providerID": f"kemu://{pool.name}/{name}"}
    if pool.taints:
        spec["taints"] = [dict(t) for t in pool.taints]
    images = [image_entry(ref, to_int(size)) for ref, size in pool.images.items()]
    status: Obj = {"capacity": dict(capacity), "allocatable": allocatable_of(capacity),
                   "addresses": [{"type": "InternalIP", "address": internal_ip(name, ordinal)},
                                 {"type": "Hostname", "address": name}],
                   "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
                   "nodeInfo": node_info(name), "images": images}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": annotations},
            "spec": spec, "status": status}


def complete_node(node: Obj, *, default_capacity: Mapping[str, str], allocatable_of: Any) -> Obj | None:
    """An adopted Node with what its manifest lacks filled in, or None if nothing is missing.

    Kept as given: capacity, allocatable, labels, taints, images, addresses, podCIDR. Filled:
    the kubelet's well-known labels, capacity (from the ``node.kubernetes.io/instance-type``
    label if it names a known type, else ``default_capacity``), allocatable (from capacity),
    ``podCIDR``, addresses, ``daemonEndpoints``, ``nodeInfo``. Conditions are the shard's
    (it owns them) and are not touched here.
    """
    meta = dict(node.get("metadata") or {})
    name = str(meta.get("name", ""))
    labels = dict(meta.get("labels") or {})
    spec = dict(node.get("spec") or {})
    status = dict(node.get("status") or {})
    for key, value in ((LABEL_HOSTNAME, name), (LABEL_OS, "linux"), (LABEL_ARCH, "amd64"),
                       ("beta.kubernetes.io/os", "linux"), ("beta.kubernetes.io/arch", "amd64")):
        labels.setdefault(key, value)
    if not status.get("capacity"):
        itype = labels.get(LABEL_INSTANCE_TYPE)
        status["capacity"] = dict(INSTANCE_TYPES.get(itype, default_capacity)) if itype else dict(default_capacity)
    if not status.get("allocatable"):
        status["allocatable"] = allocatable_of(status["capacity"])
    if not spec.get("podCIDR"):
        cidr = pod_cidr(None, name)
        spec["podCIDR"] = cidr
        spec["podCIDRs"] = [cidr]
    status.setdefault("addresses", [{"type": "InternalIP", "address": internal_ip(name, None)},
                                    {"type": "Hostname", "address": name}])
    status.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": KUBELET_PORT}})
    if not status.get("nodeInfo"):
        status["nodeInfo"] = node_info(name)
    status.setdefault("images", [])
    new = {**node, "metadata": {**meta, "labels": labels}, "spec": spec, "status": status}
    return None if new == node else new
