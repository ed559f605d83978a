"""Keeps one API server process's RBAC authorizer current with the store (an informer for four kinds).

Upstream the RBAC authorizer reads Roles, ClusterRoles and their bindings
through shared informers. kemu's equivalent: list the four kinds once, build
an :class:`~emulator.auth.rbac.RBACIndex`, then block on their watch streams
(one ``XREAD`` over all four) and rebuild the index after any change. RBAC
objects are few (hundreds), so a rebuild is a full relist: simpler than
applying deltas, and it costs milliseconds. As upstream, a change takes effect
a moment after it is written (the informer's lag), never mid-request.

After each rebuild it also does the job of upstream's clusterrole-aggregation
controller (:func:`aggregate`): an aggregated ClusterRole (``admin``, ``edit``,
``view``, or a user's) gets the rules of the roles its selectors pick written
into it, so ``kubectl describe clusterrole view`` lists them as on a real
cluster. (The authorizer does not wait for that write: its index unions the
selected rules itself.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.concurrency import run_in_threadpool

from emulator.api import errors
from emulator.api.kinds import CLUSTERROLE, CLUSTERROLEBINDING, ROLE, ROLEBINDING
from emulator.apiserver.watch import WatchSource
from emulator.auth.rbac import RBACAuthorizer, RBACIndex, aggregated_rules
from emulator.server.core import ServerCore

log = logging.getLogger("kemu.apiserver.rbac")
_KINDS = (ROLE, CLUSTERROLE, ROLEBINDING, CLUSTERROLEBINDING)


def _marker(core: ServerCore) -> str:
    return f"{core.store.config.prefix}apiserver:rbac-loaded"


def load_index(core: ServerCore) -> tuple[RBACIndex, int]:
    """The index of every RBAC object, and a resourceVersion no later than what it saw.

    It also sets a marker key: a store that was flushed (tests, ``redis-cli flushall``) loses it,
    which tells the watcher to reload even when the new events happen to reuse the old
    resourceVersions (a flushed store counts from 0 again).
    """
    core.store.redis.set(_marker(core), "1")
    rv = core.store.current_rv()
    lists = [core.list(kind).items for kind in _KINDS]
    return RBACIndex(*lists), rv


def aggregate(core: ServerCore) -> int:
    """Write aggregated ClusterRoles' rules (upstream's clusterrole-aggregation controller); returns writes.

    A conflict (another worker or replica wrote first) is left alone: that write is an event, and
    the next pass compares again.
    """
    writes = 0
    roles = core.list(CLUSTERROLE).items
    by_name = {(r.get("metadata") or {}).get("name"): r for r in roles}
    for name, rules in aggregated_rules(roles).items():
        try:
            core.update(CLUSTERROLE, {**by_name[name], "rules": rules})
            writes += 1
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise
    return writes


class RBACSource:
    def __init__(self, core: ServerCore, watches: WatchSource, authorizer: RBACAuthorizer) -> None:
        self.core = core
        self.watches = watches
        self.authorizer = authorizer
        self._task: asyncio.Task[None] | None = None
        self.rebuilds = 0

    async def start(self) -> None:
        index, rv = await run_in_threadpool(load_index, self.core)
        self.authorizer.replace(index)
        await run_in_threadpool(aggregate, self.core)
        self._task = asyncio.create_task(self._follow(rv))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _follow(self, rv: int) -> None:
        streams = [self.core.store.stream_key(k) for k in _KINDS]
        while True:
            try:
                reply = await self.watches.client.xread({s: f"{rv}-0" for s in streams}, count=1, block=1000)
                if not reply:
                    # A quiet second: also notice a store that was flushed or restored, whose new
                    # events may sit at or below ``rv`` where this XREAD never looks.
                    pipe = self.watches.client.pipeline(transaction=False)
                    pipe.get(self.core.store._rv_key)
                    pipe.exists(_marker(self.core))
                    current, marked = await pipe.execute()
                    if marked and int(current or 0) >= rv:
                        continue
                index, rv = await run_in_threadpool(load_index, self.core)
                self.authorizer.replace(index)
                self.rebuilds += 1
                await run_in_threadpool(aggregate, self.core)
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis gone for a moment: keep the last index, try again
                log.exception("RBAC watch failed; retrying")
                await asyncio.sleep(1.0)
