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

import yaml


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
    # Store.
    prefix: str = "kemu:"
    stream_cap: int = 200_000
    node_shards: int = 16
    # Cluster clock speed factor.
    clock_speed: float = 1.0
    # API server (emulator.apiserver), started by LocalCluster as a child process.
    api_enabled: bool = True
    api_host: str = "127.0.0.1"
    # None: 6443, or any free port if 6443 is taken; 0: any free port; else exactly this port.
    api_port: int | None = None
    api_workers: int = 1
    # 401 for requests without the token; None: required exactly when api_host is not loopback.
    api_require_token: bool | None = None

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
        return cfg


def _read_file(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"config file {path} is not valid YAML: {e}") from None
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
