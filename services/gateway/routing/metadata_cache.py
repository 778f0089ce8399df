"""The gateway's view of the cluster: leaders, partition counts and live nodes, fed by push.

A `MetadataWatcher` (riverlog.common.cluster) follows the metadata service's Watch stream and
holds the current immutable `ClusterImage`; this cache answers the gateway's questions from it
(where does a partition's leader live, how many partitions has a topic, which have a leader) and
lets a request wait for the NEXT image after a stale route instead of polling anyone. Derived
tables (partitions with a leader, per topic) are computed at most once per image version.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from riverlog.common.cluster.image import ClusterImage, Listener, NodeInfo, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

log = logging.getLogger(__name__)

STORAGE = "storage"


class ImageSource(Protocol):
    """What the cache needs of a `MetadataWatcher` (tests pass a fake)."""

    @property
    def image(self) -> ClusterImage: ...

    def add_listener(self, callback: Listener) -> None: ...

    async def wait_for(
        self, predicate: Callable[[ClusterImage], bool], timeout_s: float = 30.0
    ) -> ClusterImage: ...


@dataclass(frozen=True, slots=True)
class Route:
    """Where a partition's leader is, as of one metadata version."""

    node: NodeInfo
    leader_epoch: int
    version: int


class MetadataCache:
    """Read-mostly lookups over the latest image. Lifecycle: created over a started watcher;
    used by any task of the gateway's event loop (no locking: images are immutable and
    replaced whole by the watcher's task)."""

    def __init__(self, source: ImageSource) -> None:
        self._source = source
        self._available: dict[str, tuple[int, ...]] = {}
        self._available_version = -1
        source.add_listener(self._on_change)

    @property
    def image(self) -> ClusterImage:
        return self._source.image

    @property
    def version(self) -> int:
        return self._source.image.version

    def _on_change(self, old: ClusterImage, new: ClusterImage) -> None:
        if not log.isEnabledFor(logging.DEBUG):
            return
        changed = _leader_changes(old, new)
        if changed:
            log.debug("metadata %d -> %d: %d leader changes", old.version, new.version, changed)

    # --- lookups --------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicInfo:
        """The topic; RiverlogError(UNKNOWN_TOPIC_OR_PARTITION) when this image has none."""
        info = self.image.topics.get(name)
        if info is None:
            raise RiverlogError(f"unknown topic {name!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return info

    def partition_count(self, name: str) -> int:
        return len(self.topic(name).partitions)

    def route(self, tp: TopicPartition) -> Route:
        """The live leader of `tp`, or RiverlogError: UNKNOWN_TOPIC_OR_PARTITION for a topic or
        partition this image does not have, LEADER_NOT_AVAILABLE when it has no live leader."""
        image = self.image
        info = image.partition(tp.topic, tp.partition)
        if info is None:
            topic = image.topics.get(tp.topic)
            if topic is None:
                raise RiverlogError(
                    f"unknown topic {tp.topic!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
            raise RiverlogError(
                f"topic {tp.topic!r} has {len(topic.partitions)} partitions; "
                f"there is no partition {tp.partition}",
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            )
        if info.leader < 0:
            raise RiverlogError(
                f"partition {tp} has no leader (metadata version {image.version})",
                ErrorCode.LEADER_NOT_AVAILABLE,
            )
        node = image.nodes.get((STORAGE, info.leader))
        if node is None:
            raise RiverlogError(
                f"the leader of {tp}, storage node {info.leader}, is not live "
                f"(metadata version {image.version})",
                ErrorCode.LEADER_NOT_AVAILABLE,
            )
        return Route(node, info.leader_epoch, image.version)

    def available_partitions(self, name: str) -> tuple[int, ...]:
        """Partitions of `name` whose leader is live (all of them when none is), for spreading
        records that have no key."""
        image = self.image
        if image.version != self._available_version:
            self._available = {}
            self._available_version = image.version
        cached = self._available.get(name)
        if cached is not None:
            return cached
        topic = self.topic(name)
        live = tuple(
            p.partition
            for p in topic.partitions
            if p.leader >= 0 and (STORAGE, p.leader) in image.nodes
        )
        result = live or tuple(p.partition for p in topic.partitions)
        self._available[name] = result
        return result

    def live_nodes(self) -> list[NodeInfo]:
        """Every registered node, by kind then id."""
        return sorted(self.image.nodes.values(), key=lambda n: n.key)

    def topics(self) -> Mapping[str, TopicInfo]:
        return self.image.topics

    # --- waiting for the metadata to move ---------------------------------------------------

    async def wait_newer(self, version: int, timeout_s: float) -> bool:
        """Wait until the image is newer than `version`; False when `timeout_s` passed first."""
        return await self.wait_until(lambda image: image.version > version, timeout_s)

    async def wait_until(self, predicate: Callable[[ClusterImage], bool], timeout_s: float) -> bool:
        """Wait (by push, no polling) until `predicate(image)`; False on timeout."""
        if predicate(self.image):
            return True
        if timeout_s <= 0:
            return False
        try:
            await self._source.wait_for(predicate, timeout_s)
        except RiverlogError as exc:
            if exc.code != ErrorCode.REQUEST_TIMED_OUT:
                raise
            return False
        return True


def _leader_changes(old: ClusterImage, new: ClusterImage) -> int:
    """How many partitions changed leader between two images (for the debug log)."""
    count = 0
    for name, topic in new.topics.items():
        before = old.topics.get(name)
        if before is None:
            continue
        for p_old, p_new in zip(before.partitions, topic.partitions, strict=False):
            if p_old.leader != p_new.leader:
                count += 1
    return count
