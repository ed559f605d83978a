"""Fixtures shared by the integration tests of clock-driven components (controllers, eviction).

``clock`` is a :class:`ManualClock` the test moves; ``core`` is a bootstrapped
:class:`ServerCore` on the test's Redis driven by that clock; ``start_manager``
starts a non-leader-elected controller manager running just the named
controllers, and stops every manager it started when the test ends; ``local_ray``
is Ray on this machine for a module's actor tests. A test module that needs
something else defines its own fixture of the same name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.server.core import ServerCore
from emulator.store.store import Store, StoreConfig

T0 = 1_700_000_000.0  # the kubelet shard tests' cluster start time


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def core(redis_url: str, clock: ManualClock) -> ServerCore:
    c = ServerCore(Store.connect(redis_url), clock=clock)
    c.bootstrap()
    return c


@pytest.fixture
def env(redis_url: str) -> Iterator[tuple[ServerCore, ManualClock]]:
    """A core on a 4-node-shard store with its own ManualClock at T0 (kubelet shard tests)."""
    store = Store.connect(redis_url, StoreConfig(node_shards=4))
    clock = ManualClock(T0)
    core = ServerCore(store, clock)
    core.bootstrap()
    yield core, clock
    store.close()


@pytest.fixture
def start_manager(core: ServerCore, clock: ManualClock) -> Iterator[Callable[..., ControllerManager]]:
    started: list[ControllerManager] = []

    def start(*controllers: str, **options: Any) -> ControllerManager:
        m = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=controllers, options=options),
                              clock=clock).start()
        started.append(m)
        assert m.wait_active(20)
        return m

    yield start
    for m in started:
        m.stop()


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """Ray on this machine (2 CPUs) for one module's actor tests, shut down after them if this fixture started it."""
    import ray

    from actors.launcher import init_ray

    started = init_ray(num_cpus=2)
    yield
    if started:
        ray.shutdown()
