"""The emulated cloud's instances a kubelet shard owns: booted ones register, terminated ones go.

The machine side of a cloud provider. A real instance boots, its kubelet
registers the Node; a terminated one disappears with its kubelet. Here the
instances are records in Redis (:mod:`emulator.cloud.provider`) and each kubelet
shard, once per tick, acts for the ones whose names hash to it
(:meth:`KubeletShard.owns`):

* an instance whose ``ready`` time has passed and that does not fail is
  registered through :meth:`KubeletShard.add_node` as node ``index`` of its
  group's pool (Ready at once, like every pool node);
* an instance being deleted is removed through :meth:`KubeletShard.remove_node`
  (Node deleted, pods handled as the pod GC would) and its record dropped;
* a failing instance (``fails``) never registers: the Cluster Autoscaler notices
  after ``max-node-provision-time`` and deletes it, as upstream.

Cost: one ``GET`` of the cloud's version counter per tick; the instance table
is read again only when it changed or when an instance this shard waits for is
due.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from emulator.cloud.nodegroups import NodeGroupSpec
from emulator.cloud.provider import Cloud, Instance

if TYPE_CHECKING:
    from emulator.kubelet.shard import KubeletShard

log = logging.getLogger(__name__)

__all__ = ["CloudNodes"]


class CloudNodes:
    """See the module docstring; :meth:`sync` is called by the shard's tick (under its lock)."""

    def __init__(self, shard: KubeletShard) -> None:
        self.shard = shard
        self.cloud = Cloud(shard.store.redis, shard.store.config.prefix)
        self._version = -1
        self._waiting: list[Instance] = []  # owned instances not yet due (ready in the future)
        self._specs: dict[str, NodeGroupSpec] = {}

    def sync(self, now: float) -> None:
        version = self.cloud.version()
        if version == 0:
            return  # no cloud in this cluster
        if version == self._version and not any(i.ready <= now for i in self._waiting):
            return
        self._version = version
        owned = [i for i in self.cloud.instances() if self.shard.owns(i.name)]
        if any(i.group not in self._specs for i in owned):
            self._specs = self.cloud.groups()
        hosted = self.shard.state.nodes
        gone: list[str] = []
        waiting: list[Instance] = []
        for inst in owned:
            if inst.deleting is not None:
                try:
                    self.shard.remove_node(inst.name)
                except Exception:
                    log.exception("kubelet shard %d: removing instance %s failed", self.shard.index, inst.name)
                    continue
                gone.append(inst.name)
            elif inst.fails or inst.name in hosted:
                continue
            elif inst.ready > now:
                waiting.append(inst)
            else:
                spec = self._specs.get(inst.group)
                if spec is None:
                    continue
                try:
                    self.shard.add_node(spec.pool(), inst.index)
                except Exception:
                    log.exception("kubelet shard %d: registering instance %s failed", self.shard.index, inst.name)
        self._waiting = waiting
        if gone:
            self.cloud.forget(gone)
            # Read everything again next tick: an instance marked for deletion after our read bumped the
            # version too, and must not hide behind our own bump.
            self._version = -1
