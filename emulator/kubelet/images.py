"""The image manager: pulls by size, one at a time per node, and each node's image cache.

Upstream counterpart: ``pkg/kubelet/images/image_manager.go`` (``EnsureImageExists``: pull
policy, "already present on machine", the Pulling / Pulled events and their wording) with
``serializeImagePulls: true``, the default, and ``nodestatus/setters.go`` ``Images`` for what the
node reports. A pull takes ``pull_latency + size / pull_bandwidth`` seconds; sizes come from
``kemu.io/image-size[.<container>]`` annotations, the configured table, or the default. A pulled
image is remembered by the node, so the next pod with it starts faster and ImageLocality sees it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from emulator.api.gotime import go_duration
from emulator.api.quantity import to_int
from emulator.api.types import Obj
from emulator.kubelet import nodes as nd
from emulator.kubelet.state import BLOCKED, NodeRecord, PodRecord, Pull, ShardState

IMAGE_SIZE_ANNOTATION = "kemu.io/image-size"


class ImageManager:
    """Image pulls and the per-node image cache of every node of a shard."""

    def __init__(self, state: ShardState) -> None:
        cfg = state.config
        self.state = state
        self._bandwidth = float(to_int(cfg.pull_bandwidth))
        self._default_image_size = to_int(cfg.default_image_size)
        self._image_sizes = {nd.normalize_image(k): to_int(v) for k, v in cfg.image_sizes.items()}
        self._image_repo_sizes = {k: to_int(v) for k, v in cfg.image_sizes.items() if ":" not in k.rsplit("/", 1)[-1]}

    def remember(self, node: NodeRecord, entry: Mapping[str, Any]) -> None:
        """Add a ``status.images`` entry to the node's cache."""
        names = [str(n) for n in entry.get("names") or ()]
        if not names:
            return
        size = int(entry.get("sizeBytes") or 0)
        node.image_entries[names[0]] = {"names": names, "sizeBytes": size}
        for name in names:
            node.images[name] = size

    @staticmethod
    def present(node: NodeRecord, image: str) -> bool:
        return nd.normalize_image(image) in node.images or nd.qualified_image(image) in node.images

    def node_images(self, node: NodeRecord) -> list[Obj]:
        """``status.images``: largest first, at most ``nodeStatusMaxImages`` (setters.go ``Images``)."""
        entries = sorted(node.image_entries.values(), key=lambda e: (-int(e["sizeBytes"]), e["names"][0]))
        return entries[: self.state.config.max_images]

    def size_of(self, rec: PodRecord, container: Mapping[str, Any]) -> int:
        annotations = (rec.obj.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(f"{IMAGE_SIZE_ANNOTATION}.{container.get('name')}") or annotations.get(
            IMAGE_SIZE_ANNOTATION)
        if text:
            return to_int(text)
        # The configured table: the image as written (tag defaulted), else its repository at any tag.
        norm = nd.normalize_image(str(container.get("image") or ""))
        if norm in self._image_sizes:
            return self._image_sizes[norm]
        repo = norm.split("@", 1)[0] if "@" in norm else norm[: norm.rfind(":")]
        return self._image_repo_sizes.get(repo, self._default_image_size)

    def begin_pull(self, rec: PodRecord, node: NodeRecord, container: Mapping[str, Any], t: float, *,
                   init: bool) -> None:
        """``EnsureImageExists`` for one container at time ``t``: when the image will be there."""
        cfg = self.state.config
        name = str(container.get("name"))
        image = str(container.get("image") or "")
        policy = container.get("imagePullPolicy") or "IfNotPresent"
        norm = nd.normalize_image(image)
        present = self.present(node, image)
        size = self.size_of(rec, container)
        if policy == "Never" and not present:
            rec.stage = BLOCKED
            rec.next_at = math.inf
            message = f'Container image "{image}" is not present with pull policy of Never'
            rec.blocked = {"name": name, "init": init, "waiting": {"reason": "ErrImageNeverPull", "message": message}}
            self.state.pod_event(rec, "Warning", "ErrImageNeverPull", message, at=t, container=name, init=init)
            return
        if present and policy != "Always":
            rec.pull = Pull(name, image, t, t, t, size, True, init)
            rec.next_at = t
            return
        in_flight = node.pulling.get(norm)
        if in_flight is not None and in_flight > t:
            begin = done = in_flight  # another pod is pulling it: wait for that pull, then it is present
        else:
            duration = cfg.present_image_check if present else (cfg.pull_latency + size / self._bandwidth)
            begin = max(t, node.pull_free_at) if cfg.serialize_image_pulls else t
            done = begin + duration
            if cfg.serialize_image_pulls:
                node.pull_free_at = done
            node.pulling[norm] = done
        self.state.pod_event(rec, "Normal", "Pulling", f'Pulling image "{image}"', at=t, container=name, init=init)
        rec.pull = Pull(name, image, t, begin, done, size, False, init)
        rec.next_at = done

    def finish_pull(self, rec: PodRecord, node: NodeRecord) -> None:
        pull = rec.pull
        assert pull is not None
        rec.pull = None
        if pull.present:
            self.state.pod_event(rec, "Normal", "Pulled",
                                 f'Container image "{pull.image}" already present on machine',
                                 at=pull.done, container=pull.container, init=pull.init)
            return
        norm = nd.normalize_image(pull.image)
        if node.pulling.get(norm) == pull.done:
            node.pulling.pop(norm, None)
        if not self.present(node, pull.image):
            self.remember(node, nd.image_entry(pull.image, pull.size))
            node.dirty = True
        waited = pull.done - pull.asked
        rec.pull_seconds += waited
        # images.go: "Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes."
        self.state.pod_event(rec, "Normal", "Pulled",
                             f'Successfully pulled image "{pull.image}" in {go_duration(pull.done - pull.begin)} '
                             f"({go_duration(waited)} including waiting). Image size: {pull.size} bytes.",
                             at=pull.done, container=pull.container, init=pull.init)
