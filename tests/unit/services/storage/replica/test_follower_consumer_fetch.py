"""A follower serving a consumer's fetch (KIP-392, decision 0038): only a fetch that carries the
consumer's rack may be served by a follower, only up to the follower's own high watermark (what
it learned from the leader), and a position above that answers OFFSET_NOT_AVAILABLE; the
consumer fetches served are counted as leader or follower."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from types import MappingProxyType

import pytest
from storage_replica_testkit import Node, fetch_params, make_batch, make_node, topic

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.errors import ErrorCode
from riverlog.common.records import next_fetch_offset
from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.fetch import close_results
from riverlog.services.storage.replica.requests import FetchParams, FetchPartitionResult

T0 = TopicPartition("t", 0)
LEADER, FOLLOWER = 1, 2


def _image() -> ClusterImage:
    nodes = {("storage", n): NodeInfo("storage", n, "127.0.0.1", 1000 + n) for n in (1, 2)}
    info = topic("t", leaders=[LEADER], epoch=0, replicas=[[1, 2]], isr=[[1, 2]])
    return ClusterImage(
        version=1, nodes=MappingProxyType(nodes), topics=MappingProxyType({"t": info})
    )


@pytest.fixture
def follower(tmp_path: Path) -> Iterator[Node]:
    """A follower of t-0 holding offsets 0..5 (three batches of 2) with high watermark 4."""
    leader = make_node(tmp_path / "leader", ManualClock(), node_id=LEADER)
    node = make_node(tmp_path / "follower", ManualClock(), node_id=FOLLOWER)
    try:
        leader.replicas.apply_image(_image())
        node.replicas.apply_image(_image())
        lp = leader.replicas.partitions[T0]
        for i in range(3):
            lp.append_as_leader(make_batch(2, tag=i))
        read = lp.read(0, 1 << 20, True, up_to_high_watermark=False)
        assert read.records is not None
        raw = read.records.to_bytes()
        read.records.close()
        node.replicas.partitions[T0].append_as_follower(raw, leader_high_watermark=4)
        assert node.replicas.partitions[T0].high_watermark == 4
        yield node
    finally:
        node.close()
        leader.close()


async def _fetch(node: Node, offset: int, rack: str = "b") -> FetchPartitionResult:
    params: FetchParams = dataclasses.replace(fetch_params((T0, offset)), rack_id=rack)
    [result] = await node.fetch.fetch(params)
    return result


def _end(result: FetchPartitionResult, offset: int) -> int:
    """The offset after the last record returned."""
    assert result.records is not None
    try:
        return next_fetch_offset(result.records.to_bytes(), offset)
    finally:
        close_results([result])


async def test_a_follower_serves_a_consumer_with_a_rack_up_to_its_high_watermark(
    follower: Node,
) -> None:
    result = await _fetch(follower, 0)
    assert result.error == ErrorCode.NONE
    assert result.high_watermark == 4
    assert _end(result, 0) == 4  # offsets 4 and 5 are past the high watermark: not committed
    assert follower.fetch.consumer_fetches[(T0, False)] == 1


async def test_at_its_high_watermark_the_follower_answers_empty(follower: Node) -> None:
    result = await _fetch(follower, 4)
    assert (result.error, result.records, result.high_watermark) == (ErrorCode.NONE, None, 4)


async def test_above_its_high_watermark_the_follower_answers_offset_not_available(
    follower: Node,
) -> None:
    result = await _fetch(follower, 5)
    assert result.error == ErrorCode.OFFSET_NOT_AVAILABLE
    assert "high watermark 4" in result.error_message
    assert follower.fetch.consumer_fetches[(T0, False)] == 0


async def test_a_consumer_without_a_rack_still_needs_the_leader(follower: Node) -> None:
    result = await _fetch(follower, 0, rack="")
    assert result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
