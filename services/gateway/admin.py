"""Metadata answered from the gateway's cache, and the follow-up of topic administration.

GetMetadata never leaves the gateway: topics, partitions, leaders and live nodes come from the
pushed cluster image, with every topic asked for by name that is not there (or cannot be a topic
name) listed in `errors`. Topic admin calls are passed through to the metadata service unchanged
(`peers.metadata`); afterwards the gateway waits, bounded by `max.block.ms`, until its own image
shows their effect, so a client that creates a topic and produces to it at once through the same
gateway is not told the topic is unknown.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from riverlog.common.cluster.image import ClusterImage, NodeInfo, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError

from .config import GatewayConfig
from .context import Deadline
from .routing.metadata_cache import STORAGE, MetadataCache
from .validation import topic_error

log = logging.getLogger(__name__)

ADVERTISED_KINDS = frozenset({STORAGE, "gateway"})

_Predicate = Callable[[ClusterImage], bool]


@dataclass(frozen=True, slots=True)
class TopicError:
    name: str
    error_code: int
    error_message: str


@dataclass(frozen=True, slots=True)
class MetadataView:
    """What GetMetadata answers, as of one image."""

    cluster_id: str
    controller_id: int
    version: int
    topics: list[TopicInfo] = field(default_factory=list)
    nodes: list[NodeInfo] = field(default_factory=list)
    errors: list[TopicError] = field(default_factory=list)


class Admin:
    """GetMetadata and the waits after admin calls. Stateless; any task may call it."""

    def __init__(self, cache: MetadataCache, config: GatewayConfig) -> None:
        self.cache = cache
        self.config = config

    def metadata(self, names: Sequence[str], include_internal: bool) -> MetadataView:
        image = self.cache.image
        topics: list[TopicInfo] = []
        errors: list[TopicError] = []
        if not names:
            topics = [
                image.topics[n]
                for n in sorted(image.topics)
                if include_internal or not image.topics[n].internal
            ]
        for name in dict.fromkeys(names):  # in request order, each once
            bad = topic_error(name)
            info = image.topics.get(name) if bad is None else None
            if bad is not None:
                errors.append(TopicError(name, bad.code, bad.message))
            elif info is None:
                errors.append(
                    TopicError(
                        name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {name!r}"
                    )
                )
            else:
                topics.append(info)
        nodes = [n for n in self.cache.live_nodes() if n.kind in ADVERTISED_KINDS]
        return MetadataView(
            cluster_id=image.cluster_id,
            controller_id=image.controller_id,
            version=image.version,
            topics=topics,
            nodes=nodes,
            errors=errors,
        )

    # --- after admin calls: wait until this gateway sees the change -----------------------

    async def await_created(self, created: Mapping[str, str], deadline: Deadline) -> bool:
        """Wait until every topic of `created` (name → topic id, "" if unknown) is in the image
        with a leader for each partition; False when the wait ran out first."""
        if not created:
            return True

        def ready(image: ClusterImage) -> bool:
            for name, topic_id in created.items():
                info = image.topics.get(name)
                if info is None or (topic_id and info.topic_id != topic_id):
                    return False
                if any(p.leader < 0 for p in info.partitions):
                    return False
            return True

        return await self._wait(ready, deadline, f"created topics {sorted(created)}")

    async def await_deleted(self, deleted: Mapping[str, str], deadline: Deadline) -> bool:
        """Wait until no topic of `deleted` (name → the id it had) is in the image any more."""
        if not deleted:
            return True

        def gone(image: ClusterImage) -> bool:
            for name, topic_id in deleted.items():
                info = image.topics.get(name)
                if info is not None and (not topic_id or info.topic_id == topic_id):
                    return False
            return True

        return await self._wait(gone, deadline, f"deleted topics {sorted(deleted)}")

    async def await_partitions(self, counts: Mapping[str, int], deadline: Deadline) -> bool:
        """Wait until each topic has at least its count of partitions in the image."""
        if not counts:
            return True

        def grown(image: ClusterImage) -> bool:
            for name, count in counts.items():
                info = image.topics.get(name)
                if info is not None and len(info.partitions) < count:
                    return False
            return True

        return await self._wait(grown, deadline, f"new partitions of {sorted(counts)}")

    def topic_ids(self, names: Sequence[str]) -> dict[str, str]:
        """The current id of each named topic the image has."""
        topics = self.cache.image.topics
        return {n: topics[n].topic_id for n in names if n in topics}

    async def _wait(self, predicate: _Predicate, deadline: Deadline, what: str) -> bool:
        limit = deadline.earlier(self.config.max_block_s)
        try:
            done = await self.cache.wait_until(predicate, limit.remaining())
        except RiverlogError as exc:
            log.warning("waiting for %s: %s", what, exc)
            return False
        if not done:
            log.info("metadata did not show %s within %d ms", what, self.config.max_block_ms)
        return done
