"""Routes a consumer's fetch to its preferred read replica (KIP-392) instead of the leader.

Kafka's leader tells the consumer its preferred read replica and the consumer fetches from it
until the replica fails a fetch or `metadata.max.age.ms` passes. Here the gateway does both
halves: it picks the replica from its metadata image with the configured selector, and a
follower that fails a fetch (behind the consumer's position, out of range, not hosting the
partition, unreachable) is passed over for that partition for `metadata.max.age.ms`, during
which its partition is read from the leader. A follower that leaves the ISR is not chosen once
the image shows it.
"""

from __future__ import annotations

import logging

from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.types import TopicPartition

from .metadata_cache import STORAGE, MetadataCache, Route
from .replica_selector import ReplicaSelector, ReplicaView

log = logging.getLogger(__name__)


class ReadReplicas:
    """The selector over the live image, plus the followers passed over after a failure.
    Event-loop tasks only."""

    def __init__(
        self,
        cache: MetadataCache,
        selector: ReplicaSelector,
        fallback_ms: int,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.cache = cache
        self.selector = selector
        self.fallback_ms = fallback_ms
        self.clock = clock
        self._passed_over: dict[tuple[TopicPartition, int], int] = {}

    def route(self, tp: TopicPartition, client_rack: str) -> Route:
        """The replica to read `tp` from: the leader's route, or a follower's with the same
        leader epoch. Raises as `MetadataCache.route` when there is no live leader."""
        leader = self.cache.route(tp)
        if not client_rack:
            return leader
        image = self.cache.image
        info = image.partition(tp.topic, tp.partition)
        if info is None:
            return leader
        now = self.clock.monotonic_ms()
        views = []
        for node_id in info.replicas:
            node = image.nodes.get((STORAGE, node_id))
            in_sync = (
                node is not None and node_id in info.isr and not self._passed(tp, node_id, now)
            )
            views.append(ReplicaView(node_id, node.rack if node else "", in_sync))
        chosen = self.selector.select(client_rack, info.leader, views)
        node = image.nodes.get((STORAGE, chosen))
        if chosen == info.leader or node is None:
            return leader
        return Route(node, leader.leader_epoch, leader.version)

    def is_follower(self, tp: TopicPartition, node_id: int) -> bool:
        info = self.cache.image.partition(tp.topic, tp.partition)
        return info is not None and info.leader != node_id

    def pass_over(self, tp: TopicPartition, node_id: int, why: str) -> None:
        """Read `tp` from others than `node_id` for metadata.max.age.ms."""
        log.info("follower %d failed a fetch of %s (%s); reading from the leader", node_id, tp, why)
        self._passed_over[(tp, node_id)] = self.clock.monotonic_ms() + self.fallback_ms

    def _passed(self, tp: TopicPartition, node_id: int, now: int) -> bool:
        until = self._passed_over.get((tp, node_id))
        if until is None:
            return False
        if now >= until:
            del self._passed_over[(tp, node_id)]
            return False
        return True
