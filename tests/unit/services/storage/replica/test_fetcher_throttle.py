"""The follower's replication throttle (Kafka's shouldFollowerThrottle): a partition listed in
`follower.replication.throttled.replicas` for this node is left out of the fetcher's rounds
while this node is out of the ISR and its follower rate is exceeded, and fetched again once the
window moves on or the node is in sync. The leader runs in the same process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from types import MappingProxyType

from storage_replica_testkit import make_batch, make_node, topic
from test_replica_fetcher import LocalEndpoint

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.node_config import FOLLOWER_THROTTLED_RATE
from riverlog.common.quota.window import WindowConfig
from riverlog.common.replication_throttle import FOLLOWER_THROTTLED_REPLICAS
from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.fetcher import FetcherSettings, ReplicaFetcherManager
from riverlog.services.storage.replica.throttle import FOLLOWER, ReplicationQuota

T0 = TopicPartition("t", 0)
A, B = 1, 2
RATE = 1000  # bytes/s over a 3 x 1 s window (padded to 2 s: 2000 bytes fit at first)


def _image(version: int, isr: tuple[int, ...]) -> ClusterImage:
    nodes = {("storage", n): NodeInfo("storage", n, "127.0.0.1", 1000 + n) for n in (A, B)}
    info = topic(
        "t",
        leaders=[A],
        replicas=[[A, B]],
        isr=[list(isr)],
        configs={FOLLOWER_THROTTLED_REPLICAS: f"0:{B}"},
        partition_epoch=version,
    )
    return ClusterImage(
        version=version,
        nodes=MappingProxyType(nodes),
        topics=MappingProxyType({"t": info}),
        node_configs=MappingProxyType(
            {str(B): MappingProxyType({FOLLOWER_THROTTLED_RATE: str(RATE)})}
        ),
    )


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_out_of_sync_follower_skips_the_partition_over_its_rate(tmp_path: Path) -> None:
    clock = ManualClock()
    leader = make_node(tmp_path / "a", ManualClock(), node_id=A)
    follower = make_node(tmp_path / "b", clock, node_id=B)
    quota = ReplicationQuota(FOLLOWER, B, clock, WindowConfig(samples=3, sample_ms=1000))
    endpoint = LocalEndpoint(leader)
    manager = ReplicaFetcherManager(
        B,
        follower.replicas,
        lambda _node: endpoint,
        FetcherSettings(max_wait_ms=5, backoff_ms=5),
        quota=quota,
    )
    follower.replicas.on_partitions_changed.append(manager.update)

    def apply(image: ClusterImage) -> None:
        quota.update(image)
        leader.replicas.apply_image(image)
        follower.replicas.apply_image(image)

    try:
        apply(_image(1, isr=(A,)))
        lp, fp = leader.replicas.partitions[T0], follower.replicas.partitions[T0]
        for i in range(4):
            lp.append_as_leader(make_batch(1, value_size=1000, tag=i))
        await _until(lambda: fp.log_end_offset == 4, "the first copy (under the rate)")
        assert quota.recorded_bytes > 2 * RATE
        for i in range(4, 8):
            lp.append_as_leader(make_batch(1, value_size=1000, tag=i))
        await _until(lambda: quota.throttled_count >= 3, "rounds that leave the partition out")
        assert fp.log_end_offset == 4
        clock.advance(10_000)  # the window moves on
        await _until(lambda: fp.log_end_offset == 8, "the copy to go on")
        # over the rate again, but in sync now: never held back
        assert quota.is_quota_exceeded()
        apply(_image(2, isr=(A, B)))
        for i in range(8, 12):
            lp.append_as_leader(make_batch(1, value_size=1000, tag=i))
        await _until(lambda: fp.log_end_offset == 12, "in-sync replication over the rate")
    finally:
        await manager.close()
        leader.close()
        follower.close()
