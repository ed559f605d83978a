"""The Descheduler: evicts running pods that a fresh scheduling decision would place elsewhere.

A re-implementation of kubernetes-sigs/descheduler over kemu's store: a
``DeschedulerPolicy`` (``descheduler/v1alpha2``, :mod:`emulator.descheduler.api`)
names profiles, each enabling plugins at four extension points — *deschedule*
and *balance* pick pods to evict, *filter* and *preEvictionFilter* say which
pods may be evicted at all (:mod:`emulator.descheduler.framework`). Every
eviction goes through the ``pods/eviction`` subresource
(:func:`emulator.server.eviction.evict`), so PodDisruptionBudgets hold, with
the per-node / per-namespace / total limits of upstream's ``PodEvictor``
(:mod:`emulator.descheduler.evictions`). One pass is
:meth:`emulator.descheduler.descheduler.Descheduler.run_once`; it runs on the
cluster clock every ``deschedulingInterval`` as the controller manager's
``descheduler`` controller, or once with ``kemu deschedule --policy FILE``.

Plugins live one package each under :mod:`emulator.descheduler.plugins`, as
upstream's ``pkg/framework/plugins``. Scheduling semantics shared with the
scheduler (taints, node affinity, label selectors, requests) come from
:mod:`emulator.api`; the descheduler never imports scheduler plugins or other
controllers (import-linter contract).
"""
