"""kemu's configuration: one YAML file, overridable by environment and flags.

Precedence, lowest first: built-in defaults → ``--config FILE`` → environment
(``KEMU_REDIS_URL``, ``KEMU_HOME``) → command-line flags. A bad file is a
:class:`ConfigError` naming the key, never a traceback.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from emulator.yamlfile import read_yaml_file


class ConfigError(ValueError):
    pass


def kemu_home() -> Path:
    """Where kemu keeps state of local clusters (data dirs, the detached cluster's state file)."""
    return Path(os.environ.get("KEMU_HOME") or Path.home() / ".kemu")


@dataclass(frozen=True)
class Config:
    # Redis: None starts the embedded server; a URL uses an external one.
    redis_url: str | None = None
    redis_port: int | None = None
    # How long to keep trying an external Redis before giving up.
    redis_timeout: float = 10.0
    data_dir: Path = field(default_factory=lambda: kemu_home() / "data")
    # The embedded Redis's AOF fsync policy (`kemu up --durability`): "everysec" (Redis's default; the last
    # second of acknowledged writes may be lost if the machine, not the process, dies) or "strict"
    # (appendfsync always: every write is on disk before it is acknowledged, as etcd does).
    durability: str = "everysec"
    # Store.
    prefix: str = "kemu:"
    stream_cap: int = 200_000
    node_shards: int = 16
    # Cluster clock speed factor (`kemu up --clock-speed N`): every component - API server, controllers,
    # schedulers, kubelet shards - runs its periods, delays and windows on the one cluster clock.
    clock_speed: float = 1.0
    # custom.metrics.k8s.io / external.metrics.k8s.io (emulator.metricsapi): a prometheus-adapter rules
    # file (None: kemu's default rules, emulator/metricsapi/rules.yaml) and a Prometheus to run the
    # rules' queries on (None: kemu's own series - the pods' load-driven app metrics, the load targets).
    metrics_rules: str | None = None
    prometheus_url: str | None = None
    # API server (emulator.apiserver), started by LocalCluster as a child process.
    api_enabled: bool = True
    api_host: str = "127.0.0.1"
    # None: 6443, or any free port if 6443 is taken; 0: any free port; else exactly this port.
    api_port: int | None = None
    api_workers: int = 1
    # 401 for requests without the token; None: required exactly when api_host is not loopback.
    api_require_token: bool | None = None
    # A token file API server replicas share: read if it exists, else created (emulator.apiserver.kubeconfig.
    # shared_token); a kubeconfig is written next to it ("kubeconfig"). None: a fresh token per start.
    api_token_file: str | None = None
    # The server URL written into that shared kubeconfig, as other machines or containers reach the API
    # server (e.g. http://apiserver:6443 in docker-compose.yml). None: the URL this host uses.
    api_advertise_url: str | None = None
    # Serve HTTPS with a generated CA and certificate ($KEMU_HOME/pki, emulator.apiserver.tls): kubectl sends
    # bearer tokens (users' credentials) only over TLS.
    api_tls: bool = False
    # "RBAC" (upstream's authorizer, emulator.auth.rbac) or "AlwaysAllow".
    api_authorization_mode: str = "RBAC"
    # A YAML file of users (emulator.apiserver.users): each gets a token and a kubeconfig context.
    users_file: str | None = None
    # Controller managers (emulator.controllers.manager) LocalCluster runs in-process (`kemu up`: one child
    # process each, supervised); they elect one leader through a Lease, the others stand by. 0: none.
    controller_managers: int = 1
    # ManagerConfig settings (controllers: ["*", "-garbagecollector"], lease_duration, options ...).
    controller_manager: dict[str, Any] = field(default_factory=dict)
    # Run those controller managers as Ray actors (on ray_address's cluster, or a local Ray) instead of in
    # this process: the `kemu` entry point injects the runner (actors/controllers.py).
    controllers_on_ray: bool = False
    # Serve this process's /metrics (controller managers, in-process schedulers) and register it for
    # Prometheus as component=controller-manager (emulator.metrics; bind host $KEMU_METRICS_HOST).
    metrics: bool = True
    # Kubelet shards (emulator.kubelet.shard), run as Ray actors when kemu is started through its
    # entry point (actors/cli.py): `nodes` pool nodes named node-00000... of `instance_type`, plus
    # `node_pools` (mappings: name, count, instance_type, capacity, zones, labels, taints, images;
    # see emulator.kubelet.nodes.NodePool). `kubelet_shards`: None = one per 1,250 nodes, and none
    # without nodes; 0 = none; K = exactly K (at most node_shards). `kubelet`: KubeletShardConfig
    # settings (tick_interval, kube_reserved, eviction_hard, image_sizes, events ...).
    nodes: int = 0
    instance_type: str | None = None
    node_pools: list[dict[str, Any]] = field(default_factory=list)
    kubelet_shards: int | None = None
    kubelet: dict[str, Any] = field(default_factory=dict)
    # Autoscaled node groups of the emulated cloud (emulator.cloud.nodegroups: name, min, max, initial_size,
    # instance_type, price_per_hour, provisioning_delay ...); with any, the controller manager also runs the
    # cluster-autoscaler, configured by `cluster_autoscaler` (upstream flag names: expander, scan-interval,
    # scale-down-unneeded-time ...; emulator.clusterautoscaler.config).
    node_groups: list[dict[str, Any]] = field(default_factory=list)
    cluster_autoscaler: dict[str, Any] = field(default_factory=dict)
    # Join this Ray cluster instead of starting a local one; CPUs of the local one (default 2).
    ray_address: str | None = None
    ray_num_cpus: int | None = None
    # Schedulers (emulator.scheduler): `schedulers` competing replicas of the profiles in
    # `scheduler_config` (a KubeSchedulerConfiguration YAML file; None: upstream's default profile); they
    # split the pending pods by uid hash and all place onto all nodes. None = one when kubelet shards run
    # (there are nodes to schedule onto), else none; 0 = none. Under the `kemu` entry point they are Ray
    # actors (actors/scheduler.py); a LocalCluster given no scheduler runner hosts them in-process.
    schedulers: int | None = None
    scheduler_config: str | None = None

    def manager_settings(self) -> dict[str, Any]:
        """``controller_manager`` with the cluster-wide metrics settings added to its ``options``.

        The HPA controller reads custom and external metrics through the same rules file and
        Prometheus as the API server's adapter (``metrics_rules``, ``prometheus_url``); an option
        set explicitly under ``controller_manager.options`` wins. With ``node_groups`` declared, the
        ``cluster-autoscaler`` controller is added with the ``cluster_autoscaler`` flags as its option.
        """
        settings = dict(self.controller_manager)
        options = dict(settings.get("options") or {})
        for key in ("metrics_rules", "prometheus_url"):
            if getattr(self, key) is not None:
                options.setdefault(key, getattr(self, key))
        if self.node_groups:
            # Declared node groups turn the cluster-autoscaler on (unless ``-cluster-autoscaler`` opts out),
            # with the ``cluster_autoscaler`` flags; in-process and Ray-hosted managers read the same settings.
            raw = settings.get("controllers", ("*",))
            controllers = list(raw.split(",") if isinstance(raw, str) else raw)
            if "cluster-autoscaler" not in controllers and "-cluster-autoscaler" not in controllers:
                controllers.append("cluster-autoscaler")
            settings["controllers"] = controllers
            options["cluster_autoscaler"] = dict(self.cluster_autoscaler)
        settings["options"] = options
        return settings

    @classmethod
    def load(cls, path: str | Path | None = None, **overrides: Any) -> Config:
        values: dict[str, Any] = {}
        if path is not None:
            values.update(_read_file(Path(path)))
        if os.environ.get("KEMU_REDIS_URL"):
            values["redis_url"] = os.environ["KEMU_REDIS_URL"]
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls.from_dict(values)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> Config:
        known = {f.name: f for f in fields(cls)}
        cfg = cls()
        for key, value in values.items():
            name = key.replace("-", "_")
            if name not in known:
                raise ConfigError(f"unknown configuration key {key!r}; known keys: {', '.join(sorted(known))}")
            cfg = replace(cfg, **{name: _coerce(name, value, getattr(cfg, name))})
        if cfg.node_shards < 1:
            raise ConfigError("node_shards must be at least 1")
        if cfg.clock_speed <= 0:
            raise ConfigError("clock_speed must be positive")
        if cfg.api_port is not None and not 0 <= cfg.api_port <= 65535:
            raise ConfigError("api_port must be a TCP port number (0 picks a free one)")
        if cfg.api_workers < 1:
            raise ConfigError("api_workers must be at least 1")
        if cfg.api_authorization_mode not in ("RBAC", "AlwaysAllow"):
            raise ConfigError(f"api_authorization_mode must be RBAC or AlwaysAllow, not {cfg.api_authorization_mode!r}")
        if cfg.prometheus_url is not None and not str(cfg.prometheus_url).startswith(("http://", "https://")):
            raise ConfigError(f"prometheus_url must be an http:// or https:// URL, not {cfg.prometheus_url!r}")
        if cfg.metrics_rules is not None:
            from emulator.metricsapi.rules import Rules, RulesError

            try:
                rules = Rules.load(cfg.metrics_rules)
                if cfg.prometheus_url is None:
                    rules.check_local()
            except RulesError as e:
                raise ConfigError(f"metrics_rules: {e}") from None
        if cfg.api_advertise_url is not None and not str(cfg.api_advertise_url).startswith(("http://", "https://")):
            raise ConfigError(f"api_advertise_url must be an http:// or https:// URL, not {cfg.api_advertise_url!r}")
        if cfg.controller_managers < 0:
            raise ConfigError("controller_managers must not be negative")
        if cfg.durability not in ("everysec", "strict"):
            raise ConfigError(f"durability must be everysec or strict, not {cfg.durability!r}")
        if not isinstance(cfg.controller_manager, dict):
            raise ConfigError("controller_manager must be a mapping of controller manager settings")
        from emulator.controllers.manager import ManagerConfig

        try:
            ManagerConfig.from_dict(cfg.controller_manager)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"controller_manager: {e}") from None
        _check_kubelets(cfg)
        _check_schedulers(cfg)
        _check_autoscaler(cfg)
        return cfg

    def scheduler_count(self) -> int:
        """How many scheduler replicas LocalCluster runs (``schedulers``, or one when there are kubelets)."""
        if self.schedulers is not None:
            return self.schedulers
        return 1 if self.wants_kubelets() else 0

    def wants_kubelets(self) -> bool:
        """Whether LocalCluster should run kubelet shards (explicitly asked for, or nodes to run)."""
        if self.kubelet_shards is not None:
            return self.kubelet_shards > 0
        return self.nodes > 0 or bool(self.node_groups) or any(int(p.get("count", 0)) for p in self.node_pools)


def _check_autoscaler(cfg: Config) -> None:
    """``node_groups`` and ``cluster_autoscaler`` by their own parsers (whose errors name the field)."""
    if not cfg.node_groups and not cfg.cluster_autoscaler:
        return
    from emulator.cloud.nodegroups import NodeGroupConfigError, parse_node_groups
    from emulator.clusterautoscaler.config import AutoscalingOptions, OptionsError

    try:
        parse_node_groups(cfg.node_groups)
        if not isinstance(cfg.cluster_autoscaler, dict):
            raise OptionsError("cluster_autoscaler must be a mapping of cluster-autoscaler flags")
        AutoscalingOptions.from_dict(cfg.cluster_autoscaler)
    except (NodeGroupConfigError, OptionsError) as e:
        raise ConfigError(str(e)) from None


def _check_schedulers(cfg: Config) -> None:
    """``schedulers`` is a count; ``scheduler_config`` must load (its own errors name the field)."""
    if cfg.schedulers is not None:
        try:
            count = int(cfg.schedulers)
        except (TypeError, ValueError):
            raise ConfigError(f"schedulers: cannot use {cfg.schedulers!r} as int") from None
        if count < 0:
            raise ConfigError("schedulers must not be negative")
        object.__setattr__(cfg, "schedulers", count)
    if cfg.scheduler_config is not None:
        from emulator.scheduler import in_tree_registry
        from emulator.scheduler.config import SchedulerConfigError, load_configuration

        try:
            load_configuration(cfg.scheduler_config, validate_registry=in_tree_registry())
        except SchedulerConfigError as e:
            raise ConfigError(f"scheduler_config {cfg.scheduler_config}: {e}") from None


def _check_kubelets(cfg: Config) -> None:
    """The kubelet keys: types and ranges here, pool and kubelet settings by the kubelet's own parser."""
    if cfg.nodes < 0:
        raise ConfigError("nodes must not be negative")
    if cfg.kubelet_shards is not None:
        try:
            shards = int(cfg.kubelet_shards)
        except (TypeError, ValueError):
            raise ConfigError(f"kubelet_shards: cannot use {cfg.kubelet_shards!r} as int") from None
        if not 0 <= shards <= cfg.node_shards:
            raise ConfigError(f"kubelet_shards must be between 0 and node_shards ({cfg.node_shards})")
        object.__setattr__(cfg, "kubelet_shards", shards)
    if not isinstance(cfg.node_pools, list) or not all(isinstance(p, dict) for p in cfg.node_pools):
        raise ConfigError("node_pools must be a list of node pool mappings")
    if not isinstance(cfg.kubelet, dict):
        raise ConfigError("kubelet must be a mapping of kubelet settings")
    if cfg.nodes or cfg.node_pools or cfg.kubelet or cfg.instance_type:
        from emulator.kubelet.nodes import NodeConfigError
        from emulator.kubelet.shard import kubelet_shard_config

        pools = list(cfg.node_pools)
        if cfg.nodes:
            pools.append({"name": "node", "count": cfg.nodes,
                          **({"instance_type": cfg.instance_type} if cfg.instance_type else {})})
        try:
            kubelet_shard_config(cfg.kubelet, pools)
        except (NodeConfigError, TypeError, ValueError) as e:
            raise ConfigError(str(e)) from None


def _read_file(path: Path) -> dict[str, Any]:
    data = read_yaml_file(path, "config file", ConfigError)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings, not {type(data).__name__}")
    return data


def _coerce(name: str, value: Any, default: Any) -> Any:
    if value is None:
        return None
    try:
        if isinstance(default, Path):
            return Path(value).expanduser()
        if isinstance(default, bool):
            return bool(value)
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"configuration key {name!r}: cannot use {value!r} as {type(default).__name__}") from None
    return value
