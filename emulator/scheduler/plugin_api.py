"""Custom scheduler plugins in Python: the plugin API and how a configuration names them.

Upstream builds out-of-tree plugins into the scheduler binary
(``app.WithPlugin(name, factory)``) and enables them by name in
``KubeSchedulerConfiguration``. kemu does the same without a rebuild: a
plugin is a Python object, and a configuration may name it three ways.

**Writing a plugin.** A plugin is any object with a ``name`` attribute and
the methods of the extension points it serves -- exactly the protocols of
:mod:`emulator.scheduler.framework.interface` (the in-tree plugins under
:mod:`emulator.scheduler.plugins` are all written this way):

===============  ==========================================================================
point            method(s)
===============  ==========================================================================
preEnqueue       ``pre_enqueue(pod_dict) -> Status | None``
queueSort        ``less(a: QueuedPodInfo, b) -> bool``
preFilter        ``pre_filter(state, pod, snapshot) -> (PreFilterResult | None, Status | None)``
                 and ``pre_filter_extensions() -> obj with add_pod/remove_pod | None``
filter           ``filter(state, pod, node: NodeInfo) -> Status | None``; optionally the
                 vectorised ``filter_all(state, pod, snapshot) -> FilterVerdict``
postFilter       ``post_filter(state, pod, snapshot, node_to_status) -> (PostFilterResult, Status)``
preScore         ``pre_score(state, pod, snapshot, nodes) -> Status | None``
score            ``score(state, pod, node) -> (int, Status | None)``; optionally
                 ``score_all(state, pod, snapshot, nodes) -> int64 array`` and
                 ``normalize_score(state, pod, scores) -> Status | None`` (in place, to 0..100)
reserve          ``reserve(state, pod, node_name)`` / ``unreserve(...)``
permit           ``permit(state, pod, node_name) -> (Status | None, timeout_seconds)``
preBind / bind   ``pre_bind(...)`` / ``bind(...) -> Status | None`` (Skip: next binder)
postBind         ``post_bind(state, pod, node_name)``
===============  ==========================================================================

``None`` is Success. ``pod`` is a :class:`~emulator.scheduler.framework.types.PodInfo`,
``snapshot`` a :class:`~emulator.scheduler.framework.snapshot.Snapshot` (node
arrays: ``allocatable(r)``, ``requested(r)``, ``label_column(key)``...),
``nodes`` an array of snapshot indices. Plugins import only ``framework.interface``,
``framework.types``, ``framework.snapshot`` and other plugins' helpers -- never
the runtime -- so they run unchanged over a Cluster Autoscaler's hypothetical
snapshot. See :mod:`emulator.scheduler.plugins.examples.gpu_binpack` for a
complete Score plugin.

**The factory.** A plugin is built by ``factory(args, handle)``: ``args`` is
the ``args`` mapping of its ``pluginConfig`` entry (camelCase keys, or
``None``), ``handle`` the framework (``profile_name``, ``snapshot()``,
``rng``, ``plugins_at(point)``...). A class whose ``__init__(self, args,
handle)`` has that shape is its own factory; otherwise expose a function.

**Naming it in a configuration**, resolved in this order by
:func:`resolve_plugins`:

1. a name in the registry -- the in-tree plugins, the examples
   (``GPUBinPack``) and anything added with ``Registry.register(name,
   factory)``;
2. an installed entry point of group ``kemu.scheduler.plugins``
   (``[project.entry-points."kemu.scheduler.plugins"] MyPlugin =
   "my_pkg.plugins:new"``) -- the name is the entry point's;
3. an import path ``"package.module:attribute"``. The plugin is then known by
   that string everywhere (statuses, weights, metrics): its ``name`` attribute
   is set to it.

::

    apiVersion: kubescheduler.config.k8s.io/v1
    kind: KubeSchedulerConfiguration
    profiles:
    - schedulerName: research
      plugins:
        multiPoint:
          enabled:
          - {name: GPUBinPack, weight: 5}
          - {name: "my_pkg.spread:RackSpread", weight: 2}
      pluginConfig:
      - name: "my_pkg.spread:RackSpread"
        args: {rackLabel: example.com/rack}

The configuration loader calls ``resolve_plugins(registry,
plugin_names(config))`` before building the frameworks.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from importlib import metadata
from typing import Any

from emulator.scheduler.framework.interface import EXTENSION_POINTS
from emulator.scheduler.framework.registry import PluginFactory, Registry

__all__ = ["ENTRY_POINT_GROUP", "load_factory", "plugin_names", "resolve_plugins"]

ENTRY_POINT_GROUP = "kemu.scheduler.plugins"


def _import_path(spec: str) -> Any:
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ValueError(f"plugin import path {spec!r} must look like 'package.module:attribute'")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    return target


def _named(factory: PluginFactory, name: str) -> PluginFactory:
    """A factory whose plugins answer to ``name`` (the runtime keys weights and statuses by it)."""

    def build(args: Mapping[str, Any] | None, handle: Any) -> Any:
        plugin = factory(args, handle)
        if getattr(plugin, "name", None) != name:
            try:
                plugin.name = name
            except AttributeError as exc:
                raise ValueError(f"plugin {name!r}: its name attribute is {getattr(plugin, 'name', None)!r} "
                                 "and cannot be set") from exc
        return plugin

    return build


def load_factory(name: str) -> PluginFactory | None:
    """The factory an entry point or import path ``name`` designates; None when it designates nothing."""
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return _named(entry.load(), name)
    if ":" in name:
        return _named(_import_path(name), name)
    return None


def resolve_plugins(registry: Registry, names: Iterable[str]) -> Registry:
    """Register (in place) every plugin in ``names`` that ``registry`` lacks; returns ``registry``.

    Raises ValueError naming the first plugin that is neither registered, an
    entry point, nor an importable ``module:attribute``.
    """
    for name in names:
        if name in registry:
            continue
        factory = load_factory(name)
        if factory is None:
            raise ValueError(f"plugin {name!r} does not exist in the registry, is no entry point of group "
                             f"{ENTRY_POINT_GROUP!r} and is not an import path 'module:attribute'")
        registry.register(name, factory)
    return registry


def plugin_names(config: Mapping[str, Any]) -> list[str]:
    """Every plugin a ``KubeSchedulerConfiguration`` (dict) enables, in order of appearance."""
    names: dict[str, None] = {}
    for profile in config.get("profiles") or ():
        plugins = profile.get("plugins") or {}
        for point in ("multiPoint", *EXTENSION_POINTS):
            for ref in (plugins.get(point) or {}).get("enabled") or ():
                if ref.get("name") and ref["name"] != "*":
                    names.setdefault(ref["name"])
    return list(names)
