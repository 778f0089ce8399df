"""The replication throttle decision (Kafka's ReplicationQuotaManager): listed partitions of
out-of-sync replicas, while the rate is exceeded, and never anything else."""

from types import MappingProxyType

from riverlog.common.clock import ManualClock
from riverlog.common.cluster.image import ClusterImage, PartitionInfo, TopicInfo
from riverlog.common.node_config import FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE
from riverlog.common.quota.window import WindowConfig
from riverlog.common.replication_throttle import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
)
from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.throttle import (
    FOLLOWER,
    LEADER,
    ReplicationQuota,
    should_throttle,
)

WINDOW = WindowConfig(samples=3, sample_ms=1000)


def _image(node_configs: dict[str, dict[str, str]], topic_configs: dict[str, str]) -> ClusterImage:
    partitions = tuple(PartitionInfo(p, 1, 0, (1, 2, 3), (1, 2)) for p in range(3))
    topic = TopicInfo("t", "id", partitions, MappingProxyType(topic_configs))
    other = TopicInfo("u", "id2", partitions)
    return ClusterImage(
        version=1,
        topics=MappingProxyType({"t": topic, "u": other}),
        node_configs=MappingProxyType({k: MappingProxyType(v) for k, v in node_configs.items()}),
    )


def test_nothing_configured_is_inactive_and_never_throttles() -> None:
    quota = ReplicationQuota(LEADER, 1, ManualClock(), WINDOW)
    quota.update(_image({}, {}))
    assert not quota.active
    quota.record(10**9)
    assert not should_throttle(quota, TopicPartition("t", 0), in_sync=False)


def test_leader_throttles_listed_out_of_sync_replicas_over_the_rate() -> None:
    clock = ManualClock()
    quota = ReplicationQuota(LEADER, 1, clock, WINDOW)
    quota.update(
        _image({"": {LEADER_THROTTLED_RATE: "1000"}}, {LEADER_THROTTLED_REPLICAS: "0:1,1:2"})
    )
    listed, other_node, other_topic = (
        TopicPartition("t", 0),
        TopicPartition("t", 1),
        TopicPartition("u", 0),
    )
    assert quota.active and quota.bound == 1000
    assert quota.is_throttled(listed)
    assert not quota.is_throttled(other_node)  # 1:2 is node 2's to throttle
    assert not quota.is_throttled(other_topic)
    # under the rate: nothing held back yet (the window is padded to 2 s: 2000 bytes fit)
    quota.record(1500)
    assert not should_throttle(quota, listed, in_sync=False)
    quota.record(1000)
    assert should_throttle(quota, listed, in_sync=False)
    # never an in-sync replica, never an unlisted partition
    assert not should_throttle(quota, listed, in_sync=True)
    assert not should_throttle(quota, other_topic, in_sync=False)
    # the window moves on: the rate falls below the bound again
    clock.advance(4000)
    assert not should_throttle(quota, listed, in_sync=False)


def test_a_nodes_own_rate_wins_and_star_lists_every_partition() -> None:
    quota = ReplicationQuota(FOLLOWER, 2, ManualClock(), WINDOW)
    quota.update(
        _image(
            {"": {FOLLOWER_THROTTLED_RATE: "10"}, "2": {FOLLOWER_THROTTLED_RATE: "100000"}},
            {FOLLOWER_THROTTLED_REPLICAS: "*"},
        )
    )
    assert quota.bound == 100_000
    assert all(quota.is_throttled(TopicPartition("t", p)) for p in range(3))
    quota.record(1000)
    assert not quota.is_quota_exceeded()


def test_a_list_without_a_rate_records_but_never_throttles() -> None:
    quota = ReplicationQuota(FOLLOWER, 3, ManualClock(), WINDOW)
    quota.update(_image({}, {FOLLOWER_THROTTLED_REPLICAS: "2:3"}))
    tp = TopicPartition("t", 2)
    assert quota.is_throttled(tp) and quota.bound is None
    quota.record(10**9)
    assert not should_throttle(quota, tp, in_sync=False)


def test_removing_the_configs_lifts_the_throttle() -> None:
    quota = ReplicationQuota(LEADER, 1, ManualClock(), WINDOW)
    quota.update(_image({"1": {LEADER_THROTTLED_RATE: "1"}}, {LEADER_THROTTLED_REPLICAS: "*"}))
    quota.record(10_000)
    assert should_throttle(quota, TopicPartition("t", 0), in_sync=False)
    quota.update(_image({}, {}))
    assert not quota.active and quota.bound is None
    assert not should_throttle(quota, TopicPartition("t", 0), in_sync=False)
