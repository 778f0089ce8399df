"""The leader's own ISR upkeep through AlterPartition, on real processes: with
replica.lag.time.max.ms (1.5 s) well below the lease (20 s), a paused follower is still a live
member of the cluster, so only the leader can notice it fell behind. The leader asks the
controller to shrink the ISR once records it cannot fetch have waited longer than that (acks=all
then completes without it), and to expand it again once
the resumed follower has caught up; the counters in DescribeLogDirs say so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from replication_harness import ReplicationHarness, make_batch, start_replication_cluster

from riverlog.common.errors import ErrorCode
from riverlog.v1 import common_pb2

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

ALL = {1, 2, 3}


@pytest.fixture(scope="module")
def lag_harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicationHarness]:
    cluster = start_replication_cluster(
        tmp_path_factory.mktemp("isr-lag-cluster"),
        session_timeout_ms=20_000,
        lag_time_max_ms=1_500,
    )
    try:
        yield ReplicationHarness(cluster)
    finally:
        cluster.stop()


def test_leader_shrinks_a_lagging_follower_out_and_expands_it_back(
    lag_harness: ReplicationHarness,
) -> None:
    harness = lag_harness
    topic = harness.create_topic("isr-lag")
    harness.wait_isr(topic, ALL)
    before = harness.state(topic)
    leader = before.leader
    follower = next(r for r in before.replicas if r != leader)
    assert harness.produce(leader, topic, make_batch(5, tag=0)).error_code == ErrorCode.NONE
    counters = harness.describe_node(leader)
    process = harness.cluster.storage(follower)
    process.pause()
    try:
        # New records the paused follower cannot fetch (acks=1: nothing waits on it). A
        # follower of an idle partition is caught up however long it is silent (Kafka's rule).
        written = harness.produce(leader, topic, make_batch(5, tag=9), acks=common_pb2.ACKS_LEADER)
        assert written.error_code == ErrorCode.NONE
        shrunk = harness.wait_isr(topic, ALL - {follower}, timeout_s=15)
        assert shrunk.partition_epoch > before.partition_epoch
        assert shrunk.leader_epoch == before.leader_epoch  # no election: the same leader
        result = harness.produce(leader, topic, make_batch(5, tag=1))
        assert result.error_code == ErrorCode.NONE, result.error_message
        assert harness.describe_node(leader).under_replicated_partitions >= 1
    finally:
        process.resume()
    harness.wait_isr(topic, ALL, timeout_s=30)
    harness.wait_converged(topic, ALL)
    after = harness.describe_node(leader)
    assert after.isr_shrinks > counters.isr_shrinks
    assert after.isr_expands > counters.isr_expands
    assert harness.log_bytes(follower, topic) == harness.log_bytes(leader, topic)
