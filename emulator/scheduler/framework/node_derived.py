"""Per-node indexes a snapshot derives from its node objects alone: label columns, taint groups, images, a memo.

Part of :mod:`.snapshot` (upstream keeps the same facts on each ``NodeInfo``
and in the cache's ``imageStates``); shared by every fork of a snapshot and
rebuilt only when the node set changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.api.taints import Taint, node_taints

__all__ = ["LabelColumn", "NodeDerived"]


def _node_images(node: Mapping[str, Any]) -> dict[str, int]:
    """Image name -> size, every name of every image in ``status.images``."""
    out: dict[str, int] = {}
    for image in (node.get("status") or {}).get("images") or ():
        size = int(image.get("sizeBytes") or 0)
        for name in image.get("names") or ():
            out[name] = size
    return out


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


@dataclass(frozen=True, eq=False)
class LabelColumn:
    """One label key across all nodes: ``codes[i]`` indexes ``values`` (-1 when node ``i`` lacks the label).

    Requirements are evaluated once per distinct value and then spread to the
    nodes with one fancy-index: :meth:`mask` builds a table over the values,
    appends the answer for "label absent" at the end, and indexes it with
    ``codes`` (whose -1 picks that last entry).
    """

    codes: np.ndarray
    values: tuple[str, ...]

    def mask(self, test: Callable[[str], bool], absent: bool) -> np.ndarray:
        table = np.fromiter((test(v) for v in self.values), dtype=bool, count=len(self.values))
        return np.append(table, absent)[self.codes]


class NodeDerived:
    """Lazily built per-node indexes that depend only on the node objects (shared by forks)."""

    __slots__ = ("_labels", "_nodes", "_taint_groups", "images", "label_columns", "memo")

    # Node-only results plugins memoise (label masks of an affinity, taint verdicts of a toleration
    # list...). Pods repeat a few shapes, so a small bound keeps the hits and caps the memory
    # (entries are a few bool arrays over the nodes: ~15 MB at 20,000 nodes when full).
    MEMO_LIMIT = 256

    def __init__(self, nodes: Sequence[Mapping[str, Any]], labels: Sequence[Mapping[str, str]]) -> None:
        self._nodes = nodes
        self._labels = labels
        self.label_columns: dict[str, LabelColumn] = {}
        self._taint_groups: tuple[np.ndarray, tuple[tuple[Taint, ...], ...]] | None = None
        self.images: ImageIndex | None = None
        self.memo: dict[Any, Any] = {}

    def memoised(self, key: Any, compute: Callable[[], Any]) -> Any:
        try:
            return self.memo[key]
        except KeyError:
            if len(self.memo) >= self.MEMO_LIMIT:
                self.memo.clear()
            value = self.memo[key] = compute()
            return value

    def label_column(self, key: str) -> LabelColumn:
        column = self.label_columns.get(key)
        if column is None:
            code_of: dict[str, int] = {}
            codes = np.empty(len(self._labels), dtype=np.int32)
            for i, labels in enumerate(self._labels):
                value = labels.get(key)
                codes[i] = -1 if value is None else code_of.setdefault(value, len(code_of))
            column = self.label_columns[key] = LabelColumn(_frozen(codes), tuple(code_of))
        return column

    def taint_groups(self) -> tuple[np.ndarray, tuple[tuple[Taint, ...], ...]]:
        if self._taint_groups is None:
            group_of: dict[tuple[Taint, ...], int] = {}
            codes = np.fromiter((group_of.setdefault(node_taints(n), len(group_of)) for n in self._nodes),
                                dtype=np.int32, count=len(self._nodes))
            self._taint_groups = (_frozen(codes), tuple(group_of))
        return self._taint_groups

    def image_index(self) -> ImageIndex:
        if self.images is None:
            self.images = ImageIndex(self._nodes)
        return self.images


class ImageIndex:
    """Which nodes have which image (upstream cache ``imageStates``).

    The size recorded for an image name is the one reported by the first node
    (in snapshot order) that has it, as upstream's cache keeps the size of the
    node that added the name first.
    """

    __slots__ = ("_arrays", "by_node", "nodes_of", "size_of")

    def __init__(self, nodes: Sequence[Mapping[str, Any]]) -> None:
        self.by_node: list[dict[str, int]] = [_node_images(n) for n in nodes]
        self.size_of: dict[str, int] = {}
        self.nodes_of: dict[str, list[int]] = {}
        for i, images in enumerate(self.by_node):
            for name, size in images.items():
                self.size_of.setdefault(name, size)
                self.nodes_of.setdefault(name, []).append(i)
        self._arrays: dict[str, np.ndarray] = {}

    def nodes(self, name: str) -> np.ndarray:
        array = self._arrays.get(name)
        if array is None:
            array = self._arrays[name] = _frozen(np.asarray(self.nodes_of.get(name, ()), dtype=np.intp))
        return array
