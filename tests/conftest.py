"""Shared fixtures.

``redis_url`` is what tests that need Redis should use: a URL of one real
redis-server (see :mod:`emulator.store.redis_server`) started once per test
session in a temporary data directory, flushed before every test. Mark such
tests ``@pytest.mark.integration``.

Waiting: tests never sleep; they wait for a named condition with a deadline
(:func:`tests.waiting.wait_for`), and check "not yet" on cluster-clock state
(a ManualClock the test moves), never after a fixed pause.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedRedis]:
    """One embedded Redis for the whole session (starting one per test would cost ~20 ms each)."""
    server = EmbeddedRedis(RedisServerConfig(data_dir=tmp_path_factory.mktemp("redis")))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: EmbeddedRedis) -> str:
    """The session server's URL, with every database emptied first so tests cannot see each other's keys."""
    if not redis_server.running:  # a test killed it: bring it back (same port, same URL)
        redis_server.start()
    client = redis.Redis.from_url(redis_server.url)
    try:
        client.flushall()
    finally:
        client.close()
    return redis_server.url
