"""The scheduling framework: extension-point interfaces, the array-backed snapshot and the runtime.

Modules: :mod:`.interface` (Status, CycleState, plugin protocols),
:mod:`.types` (PodInfo, NodeInfo, FitError...), :mod:`.snapshot`,
:mod:`.registry`, :mod:`.profile` and :mod:`.runtime` (Framework).
Plugins may import ``interface``, ``types`` and ``snapshot`` only.
"""
