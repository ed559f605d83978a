"""Custom scheduler plugins in Python: the plugin API and how a configuration names them.

Upstream builds out-of-tree plugins into the scheduler binary (``app.WithPlugin``);
kemu needs no rebuild. A plugin is any object with a ``name`` and the methods of
the extension points it serves (the protocols of
:mod:`emulator.scheduler.framework.interface`), built by ``factory(args, handle)``.
:func:`resolve_plugins` finds a configured name in the registry, then among the
``kemu.scheduler.plugins`` entry points, then as an import path
``"package.module:attribute"``. The guide, with the method table and an
example configuration, is ``docs/scheduler-plugins.md``.
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
