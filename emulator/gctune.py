"""Garbage-collector settings for a process that holds informer caches.

An informer cache keeps every object of its kinds as a tree of dicts and
lists, all tracked by CPython's cyclic collector; a full (generation 2)
collection walks every one of them. In a controller manager, scheduler or
kubelet shard over a large cluster that walk costs most of a second and
lands in the middle of whatever the process was doing (a scheduling cycle, a
descheduling pass). Two settings, applied by the processes that host those
components (not by the components, so tests and embedded use keep Python's
defaults):

* :func:`tune_for_caches` raises the thresholds: far fewer young collections
  and, with threshold 2 at 1000, full collections only when long-lived
  objects have grown by a quarter (CPython's own rule);
* :func:`freeze_synced_caches`, once the caches have synced: what is garbage
  now is collected, and everything left moves to the permanent generation
  (``gc.freeze``, which CPython documents for long-lived start-up state), out
  of every later collection's walk. Frozen objects that become garbage later
  are still freed by reference counting; only a reference cycle among them
  would stay, and cached API objects hold none.
"""

from __future__ import annotations

import gc

# gen0 allocations, gen1 per gen0 collections, gen2 per gen1 collections.
CACHE_THRESHOLDS = (50_000, 20, 1000)


def tune_for_caches() -> None:
    gc.set_threshold(*CACHE_THRESHOLDS)


def freeze_synced_caches() -> None:
    gc.collect()
    gc.freeze()
