"""Informers: client-go's list/watch caches for kemu's internal components.

* :mod:`~emulator.informers.reflector` - list, then watch from the list's
  resourceVersion; relist with back-off on 410 Gone or a lost connection.
* :mod:`~emulator.informers.delta_fifo` - per-key ordered deltas between the
  reflector and the processing loop.
* :mod:`~emulator.informers.indexer` - the thread-safe cache with indexes (by
  namespace, node name, label, owner; custom ones).
* :mod:`~emulator.informers.shared_informer` - handlers, resync, sync
  tracking; the factory that shares one informer per (kind, namespace,
  selectors, node shard).
* :mod:`~emulator.informers.multiplexer` - one stream reader per process
  serving every informer (one ``XREAD`` for all streams, each event decoded
  once).
* :mod:`~emulator.informers.sharding` - the kubelet shard's pod filters.
"""

from emulator.informers.delta_fifo import (
    ADDED,
    DELETED,
    REPLACED,
    SYNC,
    UPDATED,
    DeletedFinalStateUnknown,
    Delta,
    DeltaFIFO,
    FIFOClosedError,
    RequeueError,
    meta_namespace_key,
)
from emulator.informers.indexer import (
    LABEL_INDEX,
    NAMESPACE_INDEX,
    NODE_NAME_INDEX,
    OWNER_UID_INDEX,
    STANDARD_INDEXERS,
    Indexer,
)
from emulator.informers.multiplexer import Multiplexer, Subscription, shared_multiplexer
from emulator.informers.reflector import Backoff, Reflector
from emulator.informers.shared_informer import (
    HandlerRegistration,
    ResourceEventHandler,
    ResourceEventHandlerFuncs,
    SharedInformer,
    SharedInformerFactory,
    wait_for_cache_sync,
)

__all__ = [
    "ADDED",
    "DELETED",
    "LABEL_INDEX",
    "NAMESPACE_INDEX",
    "NODE_NAME_INDEX",
    "OWNER_UID_INDEX",
    "REPLACED",
    "STANDARD_INDEXERS",
    "SYNC",
    "UPDATED",
    "Backoff",
    "DeletedFinalStateUnknown",
    "Delta",
    "DeltaFIFO",
    "FIFOClosedError",
    "HandlerRegistration",
    "Indexer",
    "Multiplexer",
    "Reflector",
    "RequeueError",
    "ResourceEventHandler",
    "ResourceEventHandlerFuncs",
    "SharedInformer",
    "SharedInformerFactory",
    "Subscription",
    "meta_namespace_key",
    "shared_multiplexer",
    "wait_for_cache_sync",
]
