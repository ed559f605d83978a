"""The Service registry's allocators: ClusterIPs from the service CIDR and NodePorts from their range.

Upstream ``pkg/registry/core/service/storage`` allocates both while creating a
Service (``ipallocator`` over ``--service-cluster-ip-range``, ``portallocator``
over ``--service-node-port-range``), keeps them across updates
(``patchAllocatedValues``) and a repair loop frees what no Service holds any
more. kemu keeps one Redis hash per allocator (address or port → the
``namespace/name`` holding it) and claims an entry with ``HSETNX``, so two API
server processes never hand out the same address. Instead of upstream's repair
loop, a claim that collides with an entry whose Service no longer exists (or
no longer uses it) takes the entry over, and deleting a Service frees its
entries.

The first address of the range is the ``kubernetes`` Service's, as upstream
(``--service-cluster-ip-range`` 10.96.0.0/12 by kubeadm default → 10.96.0.1).
"""

from __future__ import annotations

import ipaddress
import random
from typing import Any

from emulator.api import errors
from emulator.api.errors import Cause
from emulator.api.kinds import ENDPOINTS, ENDPOINTSLICE, SERVICE
from emulator.api.types import Obj
from emulator.server.validation import field

SERVICE_CIDR = "10.96.0.0/12"
NODE_PORT_RANGE = (30000, 32767)
_ATTEMPTS = 64


def _owner(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def kubernetes_service_ip(cidr: str = SERVICE_CIDR) -> str:
    """The first usable address of the service CIDR: the default ``kubernetes`` Service's ClusterIP."""
    return str(ipaddress.ip_network(cidr)[1])


class Allocators:
    """ClusterIP and NodePort allocation for the Service registry, over the store's Redis."""

    def __init__(self, store: Any, cidr: str = SERVICE_CIDR, node_ports: tuple[int, int] = NODE_PORT_RANGE) -> None:
        self.store = store
        self.network = ipaddress.ip_network(cidr)
        self.node_ports = node_ports
        prefix = store.config.prefix
        self.ip_key, self.port_key = f"{prefix}alloc:clusterip", f"{prefix}alloc:nodeport"

    # ------------------------------------------------------------------ claims
    def _holder_uses(self, holder: str, value: str, field: str) -> bool:
        namespace, _, name = holder.partition("/")
        try:
            svc = self.store.get(SERVICE, namespace, name)
        except errors.StatusError:
            return False
        spec = svc.get("spec") or {}
        if field == "ip":
            return value in (spec.get("clusterIPs") or [spec.get("clusterIP")])
        return any(str(p.get("nodePort")) == value for p in spec.get("ports") or [])

    def _claim(self, key: str, value: str, owner: str, field: str) -> bool:
        if self.store.redis.hsetnx(key, value, owner):
            return True
        holder = (self.store.redis.hget(key, value) or b"").decode()
        if holder == owner:
            return True
        if not self._holder_uses(holder, value, field):
            self.store.redis.hset(key, value, owner)  # the holder is gone: the repair loop's work, done lazily
            return True
        return False

    # --------------------------------------------------------------- allocate
    def allocate(self, svc: Obj) -> None:
        """Give a new Service its ClusterIP(s) and NodePorts, or 422 naming the field that cannot have them."""
        spec = svc.setdefault("spec", {})
        stype = spec.get("type", "ClusterIP")
        owner = _owner(svc)
        if stype == "ExternalName":
            return
        if spec.get("clusterIP") in ("None",) or (spec.get("clusterIPs") or [None])[0] == "None":
            spec["clusterIP"], spec["clusterIPs"] = "None", ["None"]
        else:
            spec["clusterIP"] = self._allocate_ip(owner, spec.get("clusterIP") or (spec.get("clusterIPs") or [""])[0])
            spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        if stype in ("NodePort", "LoadBalancer") and spec.get("allocateLoadBalancerNodePorts", True) is not False:
            for i, port in enumerate(spec.get("ports") or []):
                port["nodePort"] = self._allocate_port(owner, port.get("nodePort"), i)

    def _allocate_ip(self, owner: str, wanted: str) -> str:
        if wanted:
            try:
                address = ipaddress.ip_address(wanted)
            except ValueError:
                raise self._invalid("spec.clusterIPs[0]", wanted, "must be a valid IP address") from None
            if address not in self.network or address in (self.network.network_address,
                                                           self.network.broadcast_address):
                raise self._invalid("spec.clusterIPs[0]", wanted,
                                    f"failed to allocate IP {wanted}: the provided IP ({wanted}) is not in the valid "
                                    f"range. The range of valid IPs is {self.network}")
            if not self._claim(self.ip_key, wanted, owner, "ip"):
                raise self._invalid("spec.clusterIPs", [wanted], f"failed to allocate IP {wanted}: provided IP is "
                                                                 "already allocated")
            return wanted
        # Random probing as upstream's bitmap allocator (AllocateNext); the first address is kept for `kubernetes`.
        size = self.network.num_addresses - 2
        for _ in range(_ATTEMPTS):
            candidate = str(self.network.network_address + 2 + random.randrange(size - 1))
            if self._claim(self.ip_key, candidate, owner, "ip"):
                return candidate
        raise errors.StatusError(500, "InternalError", "failed to allocate a serviceIP: range is full")

    def _allocate_port(self, owner: str, wanted: Any, index: int) -> int:
        low, high = self.node_ports
        if wanted:
            if not isinstance(wanted, int) or not low <= wanted <= high:
                raise self._invalid(f"spec.ports[{index}].nodePort", wanted,
                                    f"provided port is not in the valid range. The range of valid ports is "
                                    f"{low}-{high}")
            if not self._claim(self.port_key, str(wanted), owner, "port"):
                raise self._invalid(f"spec.ports[{index}].nodePort", wanted, "provided port is already allocated")
            return wanted
        for _ in range(_ATTEMPTS):
            candidate = random.randint(low, high)
            if self._claim(self.port_key, str(candidate), owner, "port"):
                return candidate
        raise errors.StatusError(500, "InternalError", "failed to allocate a nodePort: range is full")

    @staticmethod
    def _invalid(path: str, value: Any, detail: str) -> errors.StatusError:
        causes: list[Cause] = []
        field.invalid(causes, path, value, detail)
        return errors.invalid("Service", "", causes)

    # ----------------------------------------------------------------- update
    def keep_allocated(self, new: Obj, current: Obj) -> None:
        """``patchAllocatedValues``: an update that leaves the ClusterIP or a NodePort out keeps the stored one."""
        spec, old = new.setdefault("spec", {}), current.get("spec") or {}
        old_ports = {(p.get("port"), p.get("protocol", "TCP")): p.get("nodePort") for p in old.get("ports") or []}
        if spec.get("type", "ClusterIP") in ("ClusterIP", "ExternalName") and \
                old.get("type") in ("NodePort", "LoadBalancer"):
            # dropTypeDependentFields: NodePorts the user did not change go with the type that needed them.
            for port in spec.get("ports") or []:
                if port.get("nodePort") and port["nodePort"] == old_ports.get((port.get("port"),
                                                                               port.get("protocol", "TCP"))):
                    del port["nodePort"]
        if spec.get("type", "ClusterIP") == "ExternalName":
            return
        for name in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if not spec.get(name) and old.get(name):
                spec[name] = old[name]
        if spec.get("type") in ("NodePort", "LoadBalancer"):
            owner = _owner(new)
            for i, port in enumerate(spec.get("ports") or []):
                if not port.get("nodePort"):
                    kept = old_ports.get((port.get("port"), port.get("protocol", "TCP")))
                    port["nodePort"] = kept or self._allocate_port(owner, None, i)

    def release(self, svc: Obj) -> None:
        """Free what a deleted Service held (entries another Service took over meanwhile are left alone)."""
        owner, spec = _owner(svc), svc.get("spec") or {}
        for key, values in ((self.ip_key, [ip for ip in spec.get("clusterIPs") or [] if ip != "None"]),
                            (self.port_key, [str(p["nodePort"]) for p in spec.get("ports") or []
                                             if p.get("nodePort")])):
            for value in values:
                if (self.store.redis.hget(key, value) or b"").decode() == owner:
                    self.store.redis.hdel(key, value)


def ensure_kubernetes_service(core: Any, address: str, port: int) -> None:
    """The default ``kubernetes`` Service and its Endpoints/EndpointSlice, pointing at this API server.

    Upstream's control plane keeps them (``pkg/controlplane/controller/kubernetesservice``): ClusterIP the
    service CIDR's first address, port 443 named ``https`` to the API server's secure port. ``address``
    must be an IP (a loopback bind advertises 127.0.0.1).
    """
    try:
        ip = str(ipaddress.ip_address(address))
    except ValueError:
        ip = "127.0.0.1"
    if ip in ("0.0.0.0", "::"):
        ip = "127.0.0.1"
    labels = {"component": "apiserver", "provider": "kubernetes"}
    service = {"metadata": {"name": "kubernetes", "namespace": "default", "labels": labels},
               "spec": {"type": "ClusterIP", "clusterIP": kubernetes_service_ip(),
                        "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}]}}
    endpoints = {"metadata": {"name": "kubernetes", "namespace": "default", "labels": {
        "endpointslice.kubernetes.io/skip-mirror": "true"}},
        "subsets": [{"addresses": [{"ip": ip}], "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}]}
    slice_ = {"metadata": {"name": "kubernetes", "namespace": "default",
                           "labels": {"kubernetes.io/service-name": "kubernetes"}},
              "addressType": "IPv4", "endpoints": [{"addresses": [ip], "conditions": {"ready": True}}],
              "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}
    for kind, body in ((SERVICE, service), (ENDPOINTS, endpoints), (ENDPOINTSLICE, slice_)):
        try:
            current = core.get(kind, "default", "kubernetes")
        except errors.StatusError as e:
            if e.code != 404:
                raise
            try:
                core.create(kind, body)
            except errors.StatusError as e2:
                if e2.reason != "AlreadyExists":
                    raise
            continue
        if kind is not SERVICE and any(current.get(k) != body[k] for k in body if k != "metadata"):
            core.update(kind, {**current, **{k: v for k, v in body.items() if k != "metadata"}})
