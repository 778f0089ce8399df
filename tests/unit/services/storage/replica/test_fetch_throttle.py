"""The leader's replication throttle on the fetch path (Kafka's shouldLeaderThrottle): a
follower fetch of a listed partition from a follower outside the ISR gets no records while the
node's leader rate is exceeded; in-sync followers always get theirs (consumers never reach the
check: it is for fetches with a replica id), and the window moving on lifts the throttle.
Time is a manual clock."""

import dataclasses
from types import MappingProxyType

import pytest
from storage_replica_testkit import NODE, Node, fetch_params, make_batch, produce_params, topic

from riverlog.common.cluster import ClusterImage
from riverlog.common.errors import ErrorCode
from riverlog.common.node_config import LEADER_THROTTLED_RATE
from riverlog.common.quota.window import WindowConfig
from riverlog.common.replication_throttle import LEADER_THROTTLED_REPLICAS
from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.fetch import FetchHandler, close_results
from riverlog.services.storage.replica.throttle import LEADER, ReplicationQuota

T0 = TopicPartition("t", 0)
IN_SYNC, CATCHING_UP = 2, 3
RATE = 1000  # bytes/s; the 3 x 1 s window is padded to 2 s: 2000 bytes fit at first


def _image(rate: str | None) -> ClusterImage:
    configs = {LEADER_THROTTLED_REPLICAS: f"0:{NODE}"}
    t = topic(
        "t",
        leaders=[NODE],
        epoch=1,
        replicas=[(NODE, IN_SYNC, CATCHING_UP)],
        isr=[(NODE, IN_SYNC)],
        configs=configs,
    )
    node_configs = {"": MappingProxyType({LEADER_THROTTLED_RATE: rate})} if rate else {}
    return ClusterImage(
        version=1,
        topics=MappingProxyType({"t": t}),
        node_configs=MappingProxyType(node_configs),
    )


@pytest.fixture
def handler(node: Node) -> tuple[FetchHandler, ReplicationQuota]:
    quota = ReplicationQuota(LEADER, NODE, node.clock, WindowConfig(samples=3, sample_ms=1000))
    image = _image(str(RATE))
    quota.update(image)
    node.replicas.apply_image(image)
    return FetchHandler(node.replicas, node.purgatory, 50 << 20, quota), quota


async def _fetch(fetch: FetchHandler, replica_id: int | None, offset: int = 0) -> int:
    params = dataclasses.replace(fetch_params((T0, offset), epoch=1), replica_id=replica_id)
    results = await fetch.fetch(params)
    try:
        [result] = results
        assert result.error == ErrorCode.NONE
        return result.size
    finally:
        close_results(results)


async def _produce(node: Node, count: int) -> None:
    for i in range(count):
        batch = make_batch(1, value_size=900, tag=i)
        [result] = await node.produce.produce(produce_params((T0, batch)))
        assert result.error == ErrorCode.NONE


async def test_out_of_sync_follower_is_held_back_over_the_rate(
    node: Node, handler: tuple[FetchHandler, ReplicationQuota]
) -> None:
    fetch, quota = handler
    await _produce(node, 6)
    first = await _fetch(fetch, CATCHING_UP)  # under the rate: everything
    assert first > 2 * RATE and quota.recorded_bytes == first
    assert await _fetch(fetch, CATCHING_UP) == 0  # now over it: nothing, no error
    assert quota.throttled_count == 1
    # in-sync replication is never throttled, nor counted
    assert await _fetch(fetch, IN_SYNC) == first
    assert quota.recorded_bytes == first
    # the window moves on: the catching-up follower gets its bytes again
    node.clock.advance(10_000)
    assert await _fetch(fetch, CATCHING_UP) == first


async def test_no_rate_or_no_list_never_throttles(
    node: Node, handler: tuple[FetchHandler, ReplicationQuota]
) -> None:
    fetch, quota = handler
    await _produce(node, 6)
    quota.update(_image(None))  # the list stays, the rate is gone
    sizes = [await _fetch(fetch, CATCHING_UP) for _ in range(3)]
    assert sizes[0] > 0 and sizes == [sizes[0]] * 3
    quota.update(ClusterImage())  # nothing configured: inactive, nothing recorded
    recorded = quota.recorded_bytes
    assert not quota.active
    assert await _fetch(fetch, CATCHING_UP) == sizes[0]
    assert quota.recorded_bytes == recorded
