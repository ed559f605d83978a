"""``DeschedulerPolicy`` (``descheduler/v1alpha2``): types, defaults, loading and validation.

Upstream: ``pkg/api/v1alpha2/types.go`` (the shape), ``defaults.go`` and the
v1alpha2 conversion (every profile gets ``DefaultEvictor`` at *filter* and
*preEvictionFilter* unless it names an evictor itself; an enabled plugin
without a ``pluginConfig`` entry runs with its default args), and
``pkg/api/validation`` plus each plugin's ``validation.go``.

A policy is read from YAML or a mapping with :func:`load_policy`; every
mistake is a :class:`PolicyError` naming the field, Kubernetes-style
(``profiles[0].pluginConfig[1].args.thresholds.cpu: Invalid value: 120: ...``).
Plugin args are parsed by the plugin's own module (``parse_args(raw, path)``),
so args, defaults and validation stay beside the plugin, as upstream keeps them.
:class:`ArgsReader` is the small toolkit those parsers share.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.api.errors import StatusError
from emulator.api.labels import LabelSelector
from emulator.api.types import Obj

API_VERSION = "descheduler/v1alpha2"
KIND = "DeschedulerPolicy"
EXTENSION_POINTS = ("deschedule", "balance", "filter", "preEvictionFilter")
DEFAULT_EVICTOR = "DefaultEvictor"


class PolicyError(ValueError):
    """A policy field is wrong; ``field`` is its path, the message says what and why."""

    def __init__(self, field_path: str, detail: str, value: Any = None, *, kind: str = "Invalid value") -> None:
        self.field = field_path
        shown = f": {value!r}" if value is not None else ""
        super().__init__(f"{field_path}: {kind}{shown}: {detail}" if field_path else detail)


def _join(path: str, child: str) -> str:
    return f"{path}.{child}" if path else child


class ArgsReader:
    """Reads one args mapping field by field; unknown fields are refused (upstream decodes strictly)."""

    def __init__(self, raw: Mapping[str, Any] | None, path: str, known: Sequence[str]) -> None:
        if raw is not None and not isinstance(raw, Mapping):
            raise PolicyError(path, "must be an object", type(raw).__name__)
        self.raw: Mapping[str, Any] = raw or {}
        self.path = path
        unknown = sorted(set(self.raw) - set(known) - {"apiVersion", "kind"})
        if unknown:
            raise PolicyError(_join(path, unknown[0]), f"unknown field; known: {', '.join(known)}",
                              kind="Unsupported value")

    def field(self, name: str) -> str:
        return _join(self.path, name)

    def bool(self, name: str, default: bool = False) -> bool:
        value = self.raw.get(name, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise PolicyError(self.field(name), "must be a boolean", value)
        return value

    def int(self, name: str, default: int | None = None, *, minimum: int | None = None) -> int | None:
        value = self.raw.get(name, default)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise PolicyError(self.field(name), "must be an integer", value)
        if minimum is not None and value < minimum:
            raise PolicyError(self.field(name), f"must be greater than or equal to {minimum}", value)
        return value

    def str(self, name: str, default: str = "") -> str:
        value = self.raw.get(name, default)
        if value is None:
            return default
        if not isinstance(value, str):
            raise PolicyError(self.field(name), "must be a string", value)
        return value

    def str_list(self, name: str, allowed: Sequence[str] | None = None) -> tuple[str, ...]:
        value = self.raw.get(name)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise PolicyError(self.field(name), "must be a list of strings", value)
        if allowed is not None:
            for i, v in enumerate(value):
                if v not in allowed:
                    raise PolicyError(f"{self.field(name)}[{i}]", f"supported values: {', '.join(allowed)}", v,
                                      kind="Unsupported value")
        return tuple(value)

    def selector(self, name: str) -> LabelSelector | None:
        """A ``metav1.LabelSelector``; None when absent (an empty selector matches everything)."""
        value = self.raw.get(name)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise PolicyError(self.field(name), "must be a label selector object", value)
        try:
            return LabelSelector.from_dict(value, self.field(name))
        except StatusError as e:  # the selector parser names the field itself
            causes = e.causes or []
            if causes:
                raise PolicyError(causes[0].field, causes[0].message.removeprefix("Invalid value: "),
                                  kind="Invalid value") from None
            raise PolicyError(self.field(name), e.message) from None

    def namespaces(self, name: str = "namespaces") -> Namespaces | None:
        value = self.raw.get(name)
        if value is None:
            return None
        reader = ArgsReader(value, self.field(name), ("include", "exclude"))
        ns = Namespaces(reader.str_list("include"), reader.str_list("exclude"))
        if ns.include and ns.exclude:
            raise PolicyError(self.field(name), "only one of Include/Exclude namespaces can be set", kind="Forbidden")
        return ns


@dataclass(frozen=True)
class Namespaces:
    """``api.Namespaces``: include or exclude lists (at most one of them set)."""

    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def allows(self, namespace: str) -> bool:
        if self.include:
            return namespace in self.include
        return namespace not in self.exclude


@dataclass(frozen=True)
class PluginConfig:
    name: str
    args: Any  # the plugin's parsed args dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    plugin_config: tuple[PluginConfig, ...]
    plugins: Mapping[str, tuple[str, ...]]  # extension point -> enabled plugin names, in order

    def args_of(self, plugin: str) -> Any:
        for pc in self.plugin_config:
            if pc.name == plugin:
                return pc.args
        raise KeyError(plugin)


@dataclass(frozen=True)
class DeschedulerPolicy:
    profiles: tuple[Profile, ...]
    node_selector: LabelSelector | None = None
    max_pods_per_node: int | None = None
    max_pods_per_namespace: int | None = None
    max_pods_total: int | None = None
    eviction_failure_event_notification: bool = False
    grace_period_seconds: int | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def plugin_module(name: str, path: str) -> Any:
    from emulator.descheduler.plugins import REGISTRY

    module = REGISTRY.get(name)
    if module is None:
        raise PolicyError(path, f"plugin {name!r} does not exist; known: {', '.join(sorted(REGISTRY))}", name,
                          kind="Not found")
    return importlib.import_module(module)


def _profile(raw: Any, path: str) -> Profile:
    reader = ArgsReader(raw, path, ("name", "pluginConfig", "plugins"))
    name = reader.str("name")
    if not name:
        raise PolicyError(reader.field("name"), "profile name is required", kind="Required value")
    plugins_raw = reader.raw.get("plugins") or {}
    points = ArgsReader(plugins_raw, reader.field("plugins"), EXTENSION_POINTS)
    enabled: dict[str, tuple[str, ...]] = {}
    for point in EXTENSION_POINTS:
        set_reader = ArgsReader(points.raw.get(point), points.field(point), ("enabled", "disabled"))
        names = set_reader.str_list("enabled")
        disabled = set(set_reader.str_list("disabled"))
        seen: list[str] = []
        for i, plugin in enumerate(names):
            module = plugin_module(plugin, f"{set_reader.field('enabled')}[{i}]")
            if point not in getattr(module, "EXTENSION_POINTS", ()):
                raise PolicyError(f"{set_reader.field('enabled')}[{i}]",
                                  f"plugin {plugin} does not implement the {point} extension point", plugin)
            if plugin not in disabled and plugin not in seen:
                seen.append(plugin)
        enabled[point] = tuple(seen)
    # v1alpha2 defaulting: no evictor named -> DefaultEvictor at filter and preEvictionFilter.
    if not enabled["filter"] and not enabled["preEvictionFilter"]:
        enabled["filter"] = (DEFAULT_EVICTOR,)
        enabled["preEvictionFilter"] = (DEFAULT_EVICTOR,)
    configs: dict[str, PluginConfig] = {}
    raw_configs = reader.raw.get("pluginConfig") or []
    if not isinstance(raw_configs, list):
        raise PolicyError(reader.field("pluginConfig"), "must be a list", raw_configs)
    for i, pc in enumerate(raw_configs):
        pc_path = f"{reader.field('pluginConfig')}[{i}]"
        pc_reader = ArgsReader(pc, pc_path, ("name", "args"))
        plugin = pc_reader.str("name")
        if not plugin:
            raise PolicyError(pc_reader.field("name"), "plugin name is required", kind="Required value")
        if plugin in configs:
            raise PolicyError(pc_reader.field("name"), "duplicate pluginConfig", plugin, kind="Duplicate value")
        module = plugin_module(plugin, pc_reader.field("name"))
        configs[plugin] = PluginConfig(plugin, module.parse_args(pc_reader.raw.get("args"), pc_reader.field("args")))
    for plugin in {p for names in enabled.values() for p in names}:
        if plugin not in configs:  # defaults for an enabled plugin without a pluginConfig entry
            module = plugin_module(plugin, reader.field("plugins"))
            configs[plugin] = PluginConfig(plugin, module.parse_args(None, f"{reader.field('pluginConfig')}[{plugin}]"))
    return Profile(name, tuple(configs.values()), enabled)


def load_policy(source: str | Mapping[str, Any]) -> DeschedulerPolicy:
    """A ``DeschedulerPolicy`` from YAML text or a decoded mapping; :class:`PolicyError` names the bad field."""
    if isinstance(source, str):
        import yaml

        try:
            data = yaml.safe_load(source)
        except yaml.YAMLError as e:
            raise PolicyError("", f"policy is not valid YAML: {e}") from None
    else:
        data = source
    if not isinstance(data, Mapping):
        raise PolicyError("", "a DeschedulerPolicy must be a YAML mapping")
    reader = ArgsReader(data, "", ("profiles", "nodeSelector", "maxNoOfPodsToEvictPerNode",
                                   "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal",
                                   "evictionFailureEventNotification", "gracePeriodSeconds", "metricsCollector",
                                   "metricsProviders"))
    if data.get("apiVersion", API_VERSION) != API_VERSION:
        raise PolicyError("apiVersion", f"supported: {API_VERSION} (v1alpha1 policies were removed upstream)",
                          data.get("apiVersion"), kind="Unsupported value")
    if data.get("kind", KIND) != KIND:
        raise PolicyError("kind", f"must be {KIND}", data.get("kind"), kind="Unsupported value")
    raw_profiles = data.get("profiles") or []
    if not isinstance(raw_profiles, list):
        raise PolicyError("profiles", "must be a list", raw_profiles)
    profiles = []
    names: set[str] = set()
    for i, raw in enumerate(raw_profiles):
        profile = _profile(raw, f"profiles[{i}]")
        if profile.name in names:
            raise PolicyError(f"profiles[{i}].name", "profile names must be unique", profile.name,
                              kind="Duplicate value")
        names.add(profile.name)
        profiles.append(profile)
    node_selector = None
    if reader.str("nodeSelector"):
        from emulator.api.labels import parse_label_selector

        try:
            node_selector = parse_label_selector(reader.str("nodeSelector"))
        except (StatusError, ValueError) as e:
            raise PolicyError("nodeSelector", str(getattr(e, "message", e)), reader.str("nodeSelector")) from None
    return DeschedulerPolicy(
        tuple(profiles), node_selector,
        max_pods_per_node=reader.int("maxNoOfPodsToEvictPerNode", minimum=0),
        max_pods_per_namespace=reader.int("maxNoOfPodsToEvictPerNamespace", minimum=0),
        max_pods_total=reader.int("maxNoOfPodsToEvictTotal", minimum=0),
        eviction_failure_event_notification=reader.bool("evictionFailureEventNotification"),
        grace_period_seconds=reader.int("gracePeriodSeconds", minimum=0),
        extra={k: data[k] for k in ("metricsCollector", "metricsProviders") if k in data})


def load_policy_file(path: str) -> DeschedulerPolicy:
    from pathlib import Path

    try:
        text = Path(path).read_text()
    except OSError as e:
        raise PolicyError("", f"cannot read descheduler policy {path}: {e.strerror}") from None
    return load_policy(text)


def object_namespace(obj: Obj) -> str:
    return obj["metadata"].get("namespace") or ""
