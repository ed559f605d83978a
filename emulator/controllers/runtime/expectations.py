"""Controller expectations: ``pkg/controller/controller_utils.go`` of kube-controller-manager.

:class:`ControllerExpectations` counts the creates/deletes a controller has
issued but not yet seen through its informer; a controller whose expectations
are neither fulfilled nor expired (5 minutes of cluster time) does not create or
delete again, so a slow watch never leads to a double create.
:class:`UIDTrackingControllerExpectations` remembers *which* pods it deletes, so
a graceful deletion (an update with ``deletionTimestamp``) and the final delete
are counted once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from emulator.clock import Clock

log = logging.getLogger(__name__)

# pkg/controller/controller_utils.go ExpectationsTimeout.
EXPECTATIONS_TIMEOUT = 300.0


@dataclass
class ControlleeExpectations:
    """Creates and deletes a controller still waits to observe (may go negative: more observed than expected)."""

    add: int
    delete: int
    key: str
    timestamp: float

    def fulfilled(self) -> bool:
        return self.add <= 0 and self.delete <= 0


class ControllerExpectations:
    """``ControllerExpectations``: per controller key, the creates/deletes issued but not yet observed.

    * no record → satisfied (a new controller, or one whose record was deleted);
    * a record is satisfied once both counts are <= 0, or once it is older than
      :data:`EXPECTATIONS_TIMEOUT` cluster seconds (a lost watch event must not
      stall the controller forever);
    * ``set_expectations`` replaces the record; observations only lower it.
    """

    def __init__(self, clock: Clock, ttl: float = EXPECTATIONS_TIMEOUT) -> None:
        self.clock = clock
        self.ttl = ttl
        self._records: dict[str, ControlleeExpectations] = {}
        self._lock = threading.Lock()

    def get_expectations(self, key: str) -> ControlleeExpectations | None:
        with self._lock:
            record = self._records.get(key)
            return None if record is None else ControlleeExpectations(record.add, record.delete, record.key,
                                                                      record.timestamp)

    def satisfied_expectations(self, key: str) -> bool:
        with self._lock:
            record = self._records.get(key)
            if record is None:
                return True
            return record.fulfilled() or self.clock.now() - record.timestamp > self.ttl

    def delete_expectations(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)

    def set_expectations(self, key: str, add: int, delete: int) -> None:
        with self._lock:
            self._records[key] = ControlleeExpectations(add, delete, key, self.clock.now())

    def expect_creations(self, key: str, adds: int) -> None:
        self.set_expectations(key, adds, 0)

    def expect_deletions(self, key: str, dels: int) -> None:
        self.set_expectations(key, 0, dels)

    def lower_expectations(self, key: str, add: int, delete: int) -> None:
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                record.add -= add
                record.delete -= delete

    def creation_observed(self, key: str) -> None:
        self.lower_expectations(key, 1, 0)

    def deletion_observed(self, key: str) -> None:
        self.lower_expectations(key, 0, 1)


class UIDTrackingControllerExpectations(ControllerExpectations):
    """``UIDTrackingControllerExpectations``: deletions are tracked by the deleted objects' keys.

    Upstream tracks pod keys (``namespace/name``) under the name "UIDs". A pod's deletion is
    observed once — whether the informer first shows it with ``deletionTimestamp`` (graceful) or
    only as gone — because the key is removed from the set on the first observation.
    """

    def __init__(self, clock: Clock, ttl: float = EXPECTATIONS_TIMEOUT) -> None:
        super().__init__(clock, ttl)
        self._uids: dict[str, set[str]] = {}
        self._uid_lock = threading.Lock()

    def get_uids(self, key: str) -> set[str] | None:
        with self._uid_lock:
            uids = self._uids.get(key)
            return None if uids is None else set(uids)

    def expect_deletions(self, key: str, dels: int | Iterable[str]) -> None:  # type: ignore[override]
        """Expect the deletion of these object keys (an int is accepted for the base-class contract)."""
        keys = set() if isinstance(dels, int) else set(dels)
        with self._uid_lock:
            if self._uids.get(key):
                log.warning("expectations %s: clobbering existing delete keys %s", key, sorted(self._uids[key]))
            self._uids[key] = keys
            super().expect_deletions(key, len(keys) if not isinstance(dels, int) else dels)

    def deletion_observed(self, key: str, delete_key: str = "") -> None:  # type: ignore[override]
        with self._uid_lock:
            uids = self._uids.get(key)
            if uids is not None and delete_key in uids:
                uids.discard(delete_key)
                super().deletion_observed(key)

    def delete_expectations(self, key: str) -> None:
        with self._uid_lock:
            super().delete_expectations(key)
            self._uids.pop(key, None)
