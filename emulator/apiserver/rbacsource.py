"""Keeps one API server process's RBAC authorizer current with the store (an informer for four kinds).

Upstream the RBAC authorizer reads Roles, ClusterRoles and their bindings
through shared informers. kemu's equivalent: list the four kinds once, build
an :class:`~emulator.auth.rbac.RBACIndex`, then block on their watch streams
(one ``XREAD`` over all four) and rebuild the index after any change. RBAC
objects are few (hundreds), so a rebuild is a full relist: simpler than
applying deltas, and it costs milliseconds. As upstream, a change takes effect
a moment after it is written (the informer's lag), never mid-request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from starlette.concurrency import run_in_threadpool

from emulator.api.kinds import CLUSTERROLE, CLUSTERROLEBINDING, ROLE, ROLEBINDING
from emulator.apiserver.watch import WatchSource
from emulator.auth.rbac import RBACAuthorizer, RBACIndex
from emulator.server.core import ServerCore

log = logging.getLogger("kemu.apiserver.rbac")
_KINDS = (ROLE, CLUSTERROLE, ROLEBINDING, CLUSTERROLEBINDING)


def load_index(core: ServerCore) -> tuple[RBACIndex, int]:
    """The index of every RBAC object, and a resourceVersion no later than what it saw."""
    rv = core.store.current_rv()
    lists = [core.list(kind).items for kind in _KINDS]
    return RBACIndex(*lists), rv


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
                # A quiet second: also notice a store that went back in time (flushed, restored), whose
                # new events sit below ``rv`` where this XREAD never looks.
                if not reply and int(await self.watches.client.get(self.core.store._rv_key) or 0) >= rv:
                    continue
                index, rv = await run_in_threadpool(load_index, self.core)
                self.authorizer.replace(index)
                self.rebuilds += 1
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis gone for a moment: keep the last index, try again
                log.exception("RBAC watch failed; retrying")
                await asyncio.sleep(1.0)
