"""Which HorizontalPodAutoscalers select which pods: upstream's ``hpaSelectors``.

The HPA controller (``horizontal.go``, ``validateAndParseSelector``) remembers every HPA's
target selector in a ``pkg/util/selectors`` ``BiMultimap`` and refuses to scale when the
target's pods are selected by more than one HPA (``AmbiguousSelector``). This is that map,
reduced to what the controller asks of it.
"""

from __future__ import annotations

import threading

from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj


class HPASelectors:
    """Upstream's ``hpaSelectors`` (a ``pkg/util/selectors`` ``BiMultimap``): which HPA's target selects which pods.

    Reverse lookups go through the selectors' exact ``key=value`` requirements, so finding the
    HPAs selecting a pod costs a few dict lookups, not one match per HPA.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, LabelSelector] = {}
        self._by_label: dict[str, set[str]] = {}  # "k=v" -> keys whose selector requires it
        self._unindexed: set[str] = set()  # keys whose selector has no exact requirement

    def _index_label(self, selector: LabelSelector) -> str | None:
        for req_key, _op, _values in selector.requirements:
            value = selector.exact(req_key)
            if value is not None:
                return f"{req_key}={value}"
        return None

    def put(self, key: str, selector: LabelSelector) -> None:
        with self._lock:
            old = self._by_key.get(key)
            if old is not None and str(old) == str(selector):
                return
            self._delete(key)
            self._by_key[key] = selector
            label = self._index_label(selector)
            if label is None:
                self._unindexed.add(key)
            else:
                self._by_label.setdefault(label, set()).add(key)

    def delete(self, key: str) -> None:
        with self._lock:
            self._delete(key)

    def _delete(self, key: str) -> None:
        old = self._by_key.pop(key, None)
        if old is None:
            return
        self._unindexed.discard(key)
        label = self._index_label(old)
        if label is not None:
            self._by_label.get(label, set()).discard(key)

    def selecting(self, pods: list[Obj]) -> list[str]:
        """``hpasControllingPodsUnderSelector``: the HPAs (``ns/name``, sorted) selecting any of ``pods``."""
        found: set[str] = set()
        with self._lock:
            for pod in pods:
                meta = pod["metadata"]
                labels = meta.get("labels") or {}
                namespace = meta.get("namespace") or ""
                candidates = set(self._unindexed)
                for k, v in labels.items():
                    candidates |= self._by_label.get(f"{k}={v}", set())
                for key in candidates:
                    if key.split("/", 1)[0] == namespace and self._by_key[key].matches(labels):
                        found.add(key)
        return sorted(found)
