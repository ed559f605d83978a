"""``KubeSchedulerConfiguration`` (kubescheduler.config.k8s.io/v1) files: load, default, validate, build.

What upstream does in ``pkg/scheduler/apis/config/v1/defaults.go``
(``SetDefaults_KubeSchedulerConfiguration``, ``mergePlugins``) and
``apis/config/validation/validation.go``, in our own Python:

* **Defaults.** No ``profiles`` means one profile, ``default-scheduler``. Each
  profile's plugins are upstream's default ``multiPoint`` set
  (:func:`~emulator.scheduler.framework.profile.default_plugins`) merged with
  the profile's own sets point by point, as ``mergePluginSet`` merges them: a
  ``disabled`` entry removes a default (``"*"`` all of them); an ``enabled``
  entry naming a default replaces it in place (new weight, same position);
  other ``enabled`` entries are appended. Default plugins the registry does
  not provide (not ported yet) are left out silently; plugins a *user* names
  must exist.
* **Plugin args** (``pluginConfig``) go to each plugin's constructor as the
  ``args`` dict with upstream's camelCase names (``scoringStrategy``...); a
  constructor that rejects them is reported against
  ``profiles[i].pluginConfig[j].args``.
* **Validation**, each error naming its field the way upstream's field
  errors do (``profiles[1].schedulerName: Duplicate value: "x"``): at least
  one profile; scheduler names required and unique; every profile with the
  same QueueSort plugin and args (one queue serves them all);
  ``percentageOfNodesToScore`` in [0, 100]; ``parallelism`` > 0;
  ``podInitialBackoffSeconds`` > 0 and ``podMaxBackoffSeconds`` >= it; no
  duplicate ``pluginConfig`` names; unknown fields rejected (upstream decodes
  strictly). All errors are reported at once.
* **Accepted, validated and ignored** (listed under Simplifications in
  ``docs/architecture.md``): ``parallelism``, ``leaderElection``,
  ``clientConnection``, the bind addresses, profiling, ``delayCacheUntilActive``.
* **Custom plugins** (``docs/scheduler-plugins.md``) are resolved at validation,
  so a typo is reported against its field, and registered by
  :func:`build_frameworks` in a *copy* of the registry (two schedulers built
  from one registry cannot collide on a name).
* **Extenders** are validated here (upstream's ``validateExtenders``) and
  built by :func:`build_frameworks` over an injected ``transport`` (this
  package imports no HTTP client), wired into every profile as upstream
  does; extenders without a transport are an error, not a scheduler whose
  extenders fail every cycle.

:func:`build_frameworks` turns a configuration into one
:class:`~emulator.scheduler.framework.runtime.Framework` per profile.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulator.scheduler import plugin_api
from emulator.scheduler.extender import (
    ExtenderConfig,
    HTTPExtender,
    Transport,
    parse_duration,
    validate_extenders,
    with_extenders_for_profiles,
)
from emulator.scheduler.framework.interface import EXTENSION_POINTS
from emulator.scheduler.framework.profile import (
    DEFAULT_SCHEDULER_NAME,
    PluginRef,
    PluginSet,
    Profile,
    default_plugins,
)
from emulator.scheduler.framework.registry import Registry
from emulator.scheduler.framework.runtime import Framework
from emulator.yamlfile import read_yaml_file

__all__ = [
    "API_VERSION",
    "KIND",
    "SchedulerConfigError",
    "SchedulerConfiguration",
    "build_frameworks",
    "default_configuration",
    "load_configuration",
    "parse_configuration",
    "resolve_registry",
]

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"

_TOP_LEVEL = frozenset({
    "apiVersion", "kind", "parallelism", "percentageOfNodesToScore", "podInitialBackoffSeconds",
    "podMaxBackoffSeconds", "profiles", "extenders", "leaderElection", "clientConnection", "healthzBindAddress",
    "metricsBindAddress", "enableProfiling", "enableContentionProfiling", "delayCacheUntilActive",
    "debuggingConfiguration",
})
_PROFILE_FIELDS = frozenset({"schedulerName", "percentageOfNodesToScore", "plugins", "pluginConfig"})
_POINTS = ("multiPoint", *EXTENSION_POINTS)
# upstream config/v1 ``Extender``; ``tlsConfig`` is accepted (the transport's business, see extender_http).
_EXTENDER_FIELDS = frozenset({
    "urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "bindVerb", "weight", "enableHTTPS", "tlsConfig",
    "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable",
})
DEFAULT_PARALLELISM = 16


class SchedulerConfigError(ValueError):
    """A bad configuration; ``errors`` lists every ``field: problem`` found."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors = list(errors)
        text = self.errors[0] if len(self.errors) == 1 else "[" + ", ".join(self.errors) + "]"
        super().__init__(text)


@dataclass
class SchedulerConfiguration:
    """A validated configuration: profiles (defaults merged in) and the scheduler-wide settings."""

    profiles: list[Profile]
    parallelism: int = DEFAULT_PARALLELISM
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    extenders: list[dict[str, Any]] = field(default_factory=list)

    @property
    def scheduler_names(self) -> list[str]:
        return [p.scheduler_name for p in self.profiles]


def _quote(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


class _Errors:
    def __init__(self) -> None:
        self.items: list[str] = []

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self.items.append(f"{path}: Invalid value: {_quote(value)}: {detail}")

    def required(self, path: str) -> None:
        self.items.append(f"{path}: Required value")

    def duplicate(self, path: str, value: Any) -> None:
        self.items.append(f"{path}: Duplicate value: {_quote(value)}")

    def unknown(self, path: str, name: str) -> None:
        self.items.append(f'{path}: unknown field "{name}"' if path else f'unknown field "{name}"')

    def check_fields(self, path: str, obj: Mapping[str, Any], allowed: frozenset[str]) -> None:
        for name in obj:
            if name not in allowed:
                self.unknown(path, name)

    def raise_if_any(self) -> None:
        if self.items:
            raise SchedulerConfigError(self.items)


def _mapping(errors: _Errors, path: str, value: Any) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        errors.invalid(path, type(value).__name__, "must be an object")
        return {}
    return value


def _list(errors: _Errors, path: str, value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        errors.invalid(path, type(value).__name__, "must be a list")
        return []
    return value


def _int(errors: _Errors, path: str, value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        errors.invalid(path, value, "must be an integer")
        return default
    return value


def _number(errors: _Errors, path: str, value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        errors.invalid(path, value, "must be a number")
        return default
    return float(value)


def _plugin_set(errors: _Errors, path: str, raw: Any) -> PluginSet:
    raw = _mapping(errors, path, raw)
    errors.check_fields(path, raw, frozenset({"enabled", "disabled"}))
    enabled: list[PluginRef] = []
    for i, item in enumerate(_list(errors, f"{path}.enabled", raw.get("enabled"))):
        p = f"{path}.enabled[{i}]"
        entry, name = _plugin_entry(errors, p, item)
        if name is None:
            continue
        weight = _int(errors, f"{p}.weight", entry.get("weight"), 0)
        if weight < 0:
            errors.invalid(f"{p}.weight", weight, "must be a non-negative integer (0 means the default, 1)")
            weight = 0
        enabled.append(PluginRef(name, weight))
    disabled: list[str] = []
    for i, item in enumerate(_list(errors, f"{path}.disabled", raw.get("disabled"))):
        _, name = _plugin_entry(errors, f"{path}.disabled[{i}]", item)
        if name is not None:
            disabled.append(name)
    return PluginSet(enabled, disabled)


def _plugin_entry(errors: _Errors, path: str, item: Any) -> tuple[dict[str, Any], str | None]:
    """One ``{name, weight}`` entry of a plugin set; the name is None (and reported) when missing."""
    entry = _mapping(errors, path, item)
    errors.check_fields(path, entry, frozenset({"name", "weight"}))
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        errors.required(f"{path}.name")
        return entry, None
    return entry, name


def _merge(default: PluginSet, custom: PluginSet) -> PluginSet:
    """upstream ``mergePluginSet``: custom disables and re-configurations applied to the defaults, extras appended."""
    disabled = set(custom.disabled) | set(default.disabled)
    custom_by_name = {ref.name: i for i, ref in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled:
        for ref in default.enabled:
            if ref.name in disabled:
                continue
            index = custom_by_name.get(ref.name)
            if index is None:
                enabled.append(ref)
            else:  # re-configured: the custom entry takes the default's place
                enabled.append(custom.enabled[index])
                replaced.add(index)
    enabled.extend(ref for i, ref in enumerate(custom.enabled) if i not in replaced)
    return PluginSet(enabled, [*custom.disabled, *default.disabled])


def _resolvable(name: str, cache: dict[str, str | None]) -> str | None:
    """None when ``name`` designates a plugin outside the registry (entry point or import path), else why not.

    Importing the plugin's module here is deliberate: a configuration naming a module that does not import is
    reported at load time, against the field that names it, not on the first scheduling cycle.
    """
    if name not in cache:
        try:
            factory = plugin_api.load_factory(name)
        except (ImportError, AttributeError, ValueError) as e:
            cache[name] = f"plugin {name} cannot be loaded: {e}"
        else:
            cache[name] = None if factory is not None else f"plugin {name} does not exist in the registry"
    return cache[name]


def _profile(errors: _Errors, path: str, raw: Mapping[str, Any], available: set[str] | None,
             resolved: dict[str, str | None] | None = None) -> Profile:
    errors.check_fields(path, raw, _PROFILE_FIELDS)
    name = raw.get("schedulerName", DEFAULT_SCHEDULER_NAME)
    if not isinstance(name, str) or not name:
        errors.required(f"{path}.schedulerName")
        name = ""
    percentage = raw.get("percentageOfNodesToScore")
    if percentage is not None:
        percentage = _int(errors, f"{path}.percentageOfNodesToScore", percentage, 0)
        if not 0 <= percentage <= 100:
            errors.invalid(f"{path}.percentageOfNodesToScore", percentage, "not in valid range [0-100]")
            percentage = None
    plugins = _mapping(errors, f"{path}.plugins", raw.get("plugins"))
    errors.check_fields(f"{path}.plugins", plugins, frozenset(_POINTS))
    custom = {point: _plugin_set(errors, f"{path}.plugins.{point}", plugins.get(point)) for point in _POINTS}
    for point, pset in custom.items():
        for i, ref in enumerate(pset.enabled):
            if available is None or ref.name in available or ref.name == "*":
                continue
            problem = _resolvable(ref.name, resolved if resolved is not None else {})
            if problem is not None:
                errors.invalid(f"{path}.plugins.{point}.enabled[{i}].name", ref.name, problem)
    defaults = [ref for ref in default_plugins() if available is None or ref.name in available]
    multi_point = _merge(PluginSet(defaults), custom["multiPoint"])
    points = {point: _merge(PluginSet(), custom[point]) for point in EXTENSION_POINTS
              if custom[point].enabled or custom[point].disabled}

    plugin_config: dict[str, Mapping[str, Any]] = {}
    for i, item in enumerate(_list(errors, f"{path}.pluginConfig", raw.get("pluginConfig"))):
        p = f"{path}.pluginConfig[{i}]"
        entry = _mapping(errors, p, item)
        errors.check_fields(p, entry, frozenset({"name", "args"}))
        plugin = entry.get("name")
        if not isinstance(plugin, str) or not plugin:
            errors.required(f"{p}.name")
            continue
        if plugin in plugin_config:
            errors.duplicate(p, plugin)
            continue
        args = entry.get("args")
        if args is not None and not isinstance(args, Mapping):
            errors.invalid(f"{p}.args", type(args).__name__, "must be an object")
            args = None
        plugin_config[plugin] = dict(args or {})
    return Profile(scheduler_name=name, multi_point=multi_point, points=points, plugin_config=plugin_config,
                   percentage_of_nodes_to_score=percentage)


def parse_configuration(doc: Mapping[str, Any] | None, *, available: Sequence[str] | None = None,
                        validate_registry: Mapping[str, Callable[..., Any]] | None = None) -> SchedulerConfiguration:
    """Default and validate one ``KubeSchedulerConfiguration`` document (a dict, as YAML decodes it).

    ``available`` are the plugin names the registry provides (default: every
    name, no check). With ``validate_registry`` every profile's framework is
    also built once, so bad plugin args and queue sorts are reported here.
    """
    errors = _Errors()
    doc = _mapping(errors, "", doc)
    errors.raise_if_any()
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if api_version is not None and api_version != API_VERSION:
        errors.invalid("apiVersion", api_version, f"only {API_VERSION} is supported")
    if kind is not None and kind != KIND:
        errors.invalid("kind", kind, f"must be {KIND}")
    errors.check_fields("", doc, _TOP_LEVEL)
    parallelism = _int(errors, "parallelism", doc.get("parallelism"), DEFAULT_PARALLELISM)
    if parallelism <= 0:
        errors.invalid("parallelism", parallelism, "should be an integer value greater than zero")
    percentage = _int(errors, "percentageOfNodesToScore", doc.get("percentageOfNodesToScore"), 0)
    if not 0 <= percentage <= 100:
        errors.invalid("percentageOfNodesToScore", percentage, "not in valid range [0-100]")
    initial = _number(errors, "podInitialBackoffSeconds", doc.get("podInitialBackoffSeconds"), 1.0)
    maximum = _number(errors, "podMaxBackoffSeconds", doc.get("podMaxBackoffSeconds"), 10.0)
    if initial <= 0:
        errors.invalid("podInitialBackoffSeconds", initial, "must be greater than 0")
    if maximum < initial:
        errors.invalid("podMaxBackoffSeconds", maximum, "must be greater than or equal to PodInitialBackoffSeconds")
    have = set(available) if available is not None else None
    if validate_registry is not None and have is None:
        have = set(validate_registry)
    raw_profiles = doc.get("profiles")
    if raw_profiles is None:
        raw_profiles = [{}]
    raw_profiles = _list(errors, "profiles", raw_profiles)
    if not raw_profiles and "profiles" in doc:
        errors.required("profiles")
    profiles: list[Profile] = []
    seen: set[str] = set()
    resolved: dict[str, str | None] = {}
    for i, raw in enumerate(raw_profiles):
        path = f"profiles[{i}]"
        profile = _profile(errors, path, _mapping(errors, path, raw), have, resolved)
        if profile.scheduler_name in seen:
            errors.duplicate(f"{path}.schedulerName", profile.scheduler_name)
        seen.add(profile.scheduler_name)
        profiles.append(profile)
    extenders = _extenders(errors, doc.get("extenders"))
    errors.raise_if_any()
    config = SchedulerConfiguration(profiles, parallelism, percentage, initial, maximum, extenders)
    if validate_registry is not None:
        # The frameworks are built once and dropped: extenders get a transport that is never called.
        build_frameworks(config, validate_registry, transport=_UnusedTransport())
    return config


def _extenders(errors: _Errors, raw: Any) -> list[dict[str, Any]]:
    """The ``extenders`` documents, checked field by field and with upstream's ``validateExtenders`` rules."""
    out: list[dict[str, Any]] = []
    parsed: list[ExtenderConfig] = []
    for i, item in enumerate(_list(errors, "extenders", raw)):
        path = f"extenders[{i}]"
        entry = _mapping(errors, path, item)
        errors.check_fields(path, entry, _EXTENDER_FIELDS)
        if not isinstance(entry.get("urlPrefix"), str) or not entry.get("urlPrefix"):
            errors.required(f"{path}.urlPrefix")
        weight = entry.get("weight")
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, int)):
            errors.invalid(f"{path}.weight", weight, "must be an integer")
            continue
        try:
            parse_duration(entry.get("httpTimeout"))
        except ValueError as e:
            errors.invalid(f"{path}.httpTimeout", entry.get("httpTimeout"), str(e))
            continue
        out.append(dict(entry))
        parsed.append(ExtenderConfig.from_dict(entry))
    try:
        validate_extenders(parsed)
    except ValueError as e:
        errors.items.extend(str(e).split("; "))
    return out


class _UnusedTransport:
    """The transport of frameworks built only to validate a configuration: they never run a cycle."""

    def post(self, url: str, body: bytes, timeout: float) -> tuple[int, bytes]:
        raise RuntimeError(f"extender at {url} called from a framework built for validation only")


def default_configuration(available: Sequence[str] | None = None) -> SchedulerConfiguration:
    """The configuration an empty file gives: one ``default-scheduler`` profile with upstream's defaults."""
    return parse_configuration({}, available=available)


def load_configuration(path: str | Path, *, available: Sequence[str] | None = None,
                       validate_registry: Mapping[str, Callable[..., Any]] | None = None) -> SchedulerConfiguration:
    """Read, default and validate a ``KubeSchedulerConfiguration`` YAML file."""
    doc = read_yaml_file(path, "scheduler configuration", lambda message: SchedulerConfigError([message]))
    return parse_configuration(doc, available=available, validate_registry=validate_registry)


class _PluginArgsError(Exception):
    def __init__(self, plugin: str, cause: BaseException) -> None:
        super().__init__(f"{plugin}: {cause}")
        self.plugin = plugin
        self.cause = cause


def _named(name: str, factory: Callable[..., Any]) -> Callable[..., Any]:
    """``factory`` whose failures say which plugin failed (its constructor validates its args)."""

    def build(args: Any, handle: Any) -> Any:
        try:
            return factory(args, handle)
        except (ValueError, TypeError, KeyError) as e:
            raise _PluginArgsError(name, e) from e

    return build


def _enabled_names(profiles: Sequence[Profile]) -> list[str]:
    names: dict[str, None] = {}
    for profile in profiles:
        for pset in (profile.multi_point, *profile.points.values()):
            for ref in pset.enabled:
                names.setdefault(ref.name)
    return list(names)


def resolve_registry(config: SchedulerConfiguration, registry: Mapping[str, Callable[..., Any]], *,
                     transport: Transport | None = None) -> tuple[Registry, list[Profile]]:
    """The registry and profiles a configuration runs with: custom plugins resolved, extenders wired in.

    Neither ``registry`` nor ``config`` is modified. Plugins the registry
    lacks are loaded with :func:`plugin_api.resolve_plugins` (entry point,
    then ``module:attribute``); with ``extenders`` configured every profile
    gets their Filter/Score/Bind plugins and DefaultPreemption their preempt
    verbs, over ``transport`` (required then).
    """
    resolved = Registry(dict(registry))
    missing = [name for name in _enabled_names(config.profiles) if name not in resolved and name != "*"]
    try:
        plugin_api.resolve_plugins(resolved, missing)
    except (ImportError, AttributeError, ValueError) as e:
        raise SchedulerConfigError([f"profiles.plugins: {e}"]) from e
    if not config.extenders:
        return resolved, list(config.profiles)
    if transport is None:
        raise SchedulerConfigError(["extenders: Invalid value: a transport is required to call extenders "
                                    "(emulator.extender_http.HTTPTransport)"])
    extenders = [HTTPExtender(ExtenderConfig.from_dict(raw), transport) for raw in config.extenders]
    try:
        return with_extenders_for_profiles(resolved, config.profiles, extenders)
    except ValueError as e:
        raise SchedulerConfigError(str(e).split("; ")) from e


def build_frameworks(config: SchedulerConfiguration, registry: Mapping[str, Callable[..., Any]], *,
                     rng: random.Random | None = None,
                     framework_class: type[Framework] = Framework,
                     transport: Transport | None = None,
                     wrap: Callable[[Mapping[str, Callable[..., Any]]], Mapping[str, Callable[..., Any]]] | None = None,
                     **kwargs: Any) -> dict[str, Framework]:
    """One framework per profile, keyed by scheduler name; errors name the profile (and the plugin's args).

    The registry is first completed by :func:`resolve_registry` (custom
    plugins, extenders over ``transport``); ``wrap`` then decorates the
    complete registry (the scheduler times every plugin, custom ones and
    extenders included, this way). Every framework shares ``rng`` (a seeded
    one makes tie-breaking repeatable); ``kwargs`` go to the framework class.
    """
    errors = _Errors()
    frameworks: dict[str, Framework] = {}
    rng = rng if rng is not None else random.Random()
    complete, profiles = resolve_registry(config, registry, transport=transport)
    factories: Mapping[str, Callable[..., Any]] = wrap(complete) if wrap is not None else complete
    wrapped = {name: _named(name, factory) for name, factory in factories.items()}
    for i, profile in enumerate(profiles):
        path = f"profiles[{i}]"
        try:
            frameworks[profile.scheduler_name] = framework_class(
                wrapped, profile, rng=rng, percentage_of_nodes_to_score=config.percentage_of_nodes_to_score,
                **kwargs)
        except _PluginArgsError as e:
            names = list(profile.plugin_config)
            where = (f"{path}.pluginConfig[{names.index(e.plugin)}].args" if e.plugin in names
                     else f"{path}.plugins")
            errors.invalid(where, e.plugin, str(e.cause))
        except (ValueError, TypeError, KeyError) as e:
            errors.invalid(f"{path}.plugins", profile.scheduler_name, str(e))
    errors.raise_if_any()
    sorts = {name: [p.name for p in fw.plugins_at("queueSort")] for name, fw in frameworks.items()}
    first = next(iter(sorts.values()), [])
    first_args = profiles[0].plugin_config.get(first[0]) if first else None
    for i, profile in enumerate(profiles[1:], start=1):
        mine = sorts[profile.scheduler_name]
        if mine != first:
            errors.invalid(f"profiles[{i}].plugins.queueSort", ",".join(mine) or "none",
                           "queueSort must be the same for all profiles")
        elif mine and profile.plugin_config.get(mine[0]) != first_args:
            errors.invalid(f"profiles[{i}].pluginConfig", mine[0], "queueSort must be the same for all profiles")
    errors.raise_if_any()
    return frameworks
