"""Replication throttles on a storage node (Kafka's ReplicationQuotaManager), one per direction:
the leader's, for the bytes it serves to followers, and the follower's, for the bytes its
fetchers pull.

A direction throttles a partition when the partition's topic lists `<partition>:<this node>`
(or `*`) in its `leader.` / `follower.replication.throttled.replicas` config, the node has a
`leader.` / `follower.replication.throttled.rate` (its own, else the default entity's), the
replica concerned is NOT in the ISR, and the bytes recorded over the window exceed the rate
(`should_throttle`, Kafka's shouldLeaderThrottle / shouldFollowerThrottle). So in-sync
replication and client traffic never wait: only the catch-up copy of a moving or lagging
replica does. The rate is Kafka's sampled rate (`riverlog.common.quota.window`) over
`replication.quota.window.num` samples of `replication.quota.window.size.seconds`.

`update(image)` runs at each image; the fetch paths call `is_throttled(tp)` first, which is one
dict lookup (and a False attribute read when nothing is throttled), so an unthrottled node does
no per-byte work. Event-loop thread only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from riverlog.common import node_config
from riverlog.common.clock import Clock
from riverlog.common.cluster.image import ClusterImage
from riverlog.common.quota.window import SampledRate, WindowConfig
from riverlog.common.replication_throttle import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    partitions_throttled_on,
)
from riverlog.common.types import TopicPartition

LEADER: Final = "leader"
FOLLOWER: Final = "follower"

_NAMES: Final = {
    LEADER: (node_config.LEADER_THROTTLED_RATE, LEADER_THROTTLED_REPLICAS),
    FOLLOWER: (node_config.FOLLOWER_THROTTLED_RATE, FOLLOWER_THROTTLED_REPLICAS),
}


class ReplicationQuota:
    """One direction's throttle on this node: which partitions, what rate, what was used."""

    def __init__(self, direction: str, node_id: int, clock: Clock, window: WindowConfig) -> None:
        self.direction = direction
        self.node_id = node_id
        self.clock = clock
        self._rate_key, self._replicas_key = _NAMES[direction]
        self._usage = SampledRate(window)
        self.bound: int | None = None
        """Bytes/s; None when no rate is set (Kafka's Long.MAX_VALUE: never exceeded)."""
        self._throttled: dict[str, frozenset[int] | None] = {}
        self.active = False
        """Some partition is listed: the fetch paths look further only then."""
        self.recorded_bytes = 0
        self.throttled_count = 0
        """Times a partition was held back (left out of a fetch or answered empty)."""

    def update(self, image: ClusterImage) -> None:
        """Take the rate and the lists of the image (an image listener)."""
        self.bound = node_config.rate(image.node_configs, self.node_id, self._rate_key)
        throttled: dict[str, frozenset[int] | None] = {}
        for topic in image.topics.values():
            raw = topic.configs.get(self._replicas_key)
            if not raw:
                continue
            partitions = partitions_throttled_on(self._replicas_key, raw, self.node_id)
            if partitions is None or partitions:
                throttled[topic.name] = partitions
        self._throttled = throttled
        self.active = bool(throttled)

    def is_throttled(self, tp: TopicPartition) -> bool:
        """Whether `tp` is listed for this node (Kafka's isThrottled); the rate is not looked
        at."""
        if not self.active:
            return False
        if tp.topic not in self._throttled:
            return False
        partitions = self._throttled[tp.topic]
        return partitions is None or tp.partition in partitions

    def is_quota_exceeded(self) -> bool:
        """Whether the bytes recorded over the window exceed the rate (Kafka's
        isQuotaExceeded); never without a rate."""
        bound = self.bound
        if bound is None:
            return False
        return self._usage.measure(self.clock.monotonic_ms()) > bound

    def record(self, size: int) -> None:
        """Count `size` bytes of throttled replication (sent or fetched)."""
        if size > 0:
            self._usage.record(float(size), self.clock.monotonic_ms())
            self.recorded_bytes += size

    def record_all(self, sizes: Iterable[int]) -> None:
        total = sum(sizes)
        if total:
            self.record(total)

    def rate(self) -> float:
        """The measured rate in bytes/s (for logs and tests)."""
        return self._usage.measure(self.clock.monotonic_ms())


def should_throttle(quota: ReplicationQuota, tp: TopicPartition, in_sync: bool) -> bool:
    """Kafka's shouldLeaderThrottle / shouldFollowerThrottle: a replica not in the ISR, of a
    listed partition, while the rate is exceeded. In-sync replicas are never held back: they
    carry the writes that acks=all and the high watermark wait for."""
    return not in_sync and quota.is_throttled(tp) and quota.is_quota_exceeded()
