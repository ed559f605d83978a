"""Plugin registry: plugin name -> constructor (upstream ``framework/runtime/registry.go``).

A constructor takes the plugin's arguments -- the ``args`` of its
``pluginConfig`` entry, a dict with upstream's camelCase field names, or
``None`` -- and the framework :class:`~emulator.scheduler.framework.interface.Handle`,
and returns the plugin. The in-tree registry lives in
:func:`emulator.scheduler.plugins.in_tree_registry`; out-of-tree (research)
plugins are added with :meth:`Registry.register` or :meth:`Registry.merge`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from emulator.scheduler.framework.interface import Handle

__all__ = ["PluginFactory", "Registry"]

PluginFactory = Callable[[Mapping[str, Any] | None, Handle], Any]


class Registry(Mapping[str, PluginFactory]):
    """A mapping of plugin names to factories that refuses silent overwrites."""

    def __init__(self, factories: Mapping[str, PluginFactory] | None = None) -> None:
        self._factories: dict[str, PluginFactory] = dict(factories or {})

    def register(self, name: str, factory: PluginFactory) -> None:
        if name in self._factories:
            raise ValueError(f"a plugin named {name} already exists")
        self._factories[name] = factory

    def unregister(self, name: str) -> None:
        if self._factories.pop(name, None) is None:
            raise KeyError(f"no plugin named {name} exists")

    def merge(self, other: Mapping[str, PluginFactory]) -> None:
        for name, factory in other.items():
            self.register(name, factory)

    def __getitem__(self, name: str) -> PluginFactory:
        return self._factories[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)
