"""Fetch on the leader: stored bytes as they are, Kafka's byte budget, only up to the high
watermark, per-partition errors, and the long poll (woken by appends and by errors, expiring
at max_wait_ms). Waits are short and bounded; nothing asserts how long anything took."""

import asyncio

import pytest
from storage_replica_testkit import (
    NODE,
    OTHER,
    Node,
    fetch_params,
    image,
    make_batch,
    produce_params,
    topic,
)

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.header import iter_batches
from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.fetch import close_results
from riverlog.services.storage.replica.requests import (
    FetchParams,
    FetchPartitionData,
    FetchPartitionResult,
)

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


@pytest.fixture(autouse=True)
def _topics(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", leaders=[NODE, NODE], epoch=1)))


async def fetch_bytes(node: Node, *args, **kwargs) -> list[tuple[ErrorCode, bytes]]:
    results = await node.fetch.fetch(fetch_params(*args, **kwargs))
    try:
        return [(r.error, r.records.to_bytes() if r.records else b"") for r in results]
    finally:
        close_results(results)


async def produce(node: Node, tp: TopicPartition, *batches: bytes) -> None:
    [result] = await node.produce.produce(produce_params((tp, b"".join(batches))))
    assert result.error == ErrorCode.NONE


async def test_returns_the_stored_bytes(node: Node) -> None:
    batches = [make_batch(3, tag=i) for i in range(4)]
    for batch in batches:
        await produce(node, T0, batch)
    [(error, data)] = await fetch_bytes(node, (T0, 0))
    assert error == ErrorCode.NONE
    headers = iter_batches(data)
    assert [h.base_offset for h in headers] == [0, 3, 6, 9]
    # Beyond the base offset and the leader epoch (rewritten on append), the bytes are the
    # producer's.
    assert [
        data[sum(h.size for h in headers[:i]) :][17 : h.size] for i, h in enumerate(headers)
    ] == [b[17:] for b in batches]
    # From the middle of a batch: the whole batch holding the offset comes back.
    [(_, data)] = await fetch_bytes(node, (T0, 4))
    assert iter_batches(data)[0].base_offset == 3


async def test_offsets_and_watermarks_in_the_result(node: Node) -> None:
    await produce(node, T0, make_batch(5))
    results = await node.fetch.fetch(fetch_params((T0, 5), (T1, 0)))
    assert [
        (r.error, r.size, r.high_watermark, r.log_end_offset, r.log_start_offset) for r in results
    ] == [
        (ErrorCode.NONE, 0, 5, 5, 0),
        (ErrorCode.NONE, 0, 0, 0, 0),
    ]
    assert results[0].last_stable_offset == 5


async def test_byte_budget(node: Node) -> None:
    batch = make_batch(1, value_size=1000)
    size = len(batch)
    for _ in range(5):
        await produce(node, T0, batch)
        await produce(node, T1, batch)
    # Request budget: two batches from T0 fill it; T1 gets nothing.
    results = await fetch_bytes(node, (T0, 0), (T1, 0), max_bytes=2 * size)
    assert [len(d) for _, d in results] == [2 * size, 0]
    # Partition budget: one batch each.
    results = await fetch_bytes(node, (T0, 0), (T1, 0), partition_max_bytes=size + 10)
    assert [len(d) for _, d in results] == [size, size]
    # A batch larger than every limit still comes back whole for the first partition only.
    results = await fetch_bytes(node, (T0, 0), (T1, 0), max_bytes=10, partition_max_bytes=10)
    assert [len(d) for _, d in results] == [size, 0]


async def test_fetch_max_bytes_caps_the_request(node: Node) -> None:
    batch = make_batch(1, value_size=1000)
    for _ in range(3):
        await produce(node, T0, batch)
    node.fetch._fetch_max_bytes = len(batch)
    [(_, data)] = await fetch_bytes(node, (T0, 0), max_bytes=1 << 20)
    assert len(data) == len(batch)


async def test_per_partition_errors(node: Node) -> None:
    node.replicas.apply_image(
        image(topic("t", leaders=[NODE, NODE], epoch=1), topic("x", leaders=[OTHER]), version=2)
    )
    await produce(node, T0, make_batch(2))
    results = await fetch_bytes(
        node,
        (T0, 3),
        (T0, -1),
        (TopicPartition("x", 0), 0),
        (TopicPartition("nope", 0), 0),
        (T1, 0),
    )
    assert [e for e, _ in results] == [
        ErrorCode.OFFSET_OUT_OF_RANGE,
        ErrorCode.OFFSET_OUT_OF_RANGE,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NONE,
    ]
    fenced = await fetch_bytes(node, (T0, 0), epoch=0)
    assert fenced[0][0] == ErrorCode.FENCED_LEADER_EPOCH


async def test_whole_request_validation(node: Node) -> None:
    for kwargs in ({"max_bytes": -1}, {"min_bytes": -1}, {"max_wait_ms": -5}):
        with pytest.raises(RiverlogError) as exc:
            await node.fetch.fetch(fetch_params((T0, 0), **kwargs))
        assert exc.value.code == ErrorCode.INVALID_REQUEST
    [(error, _)] = await fetch_bytes(node, (T0, 0), partition_max_bytes=-1)
    assert error == ErrorCode.INVALID_FETCH_SIZE


async def test_only_up_to_the_high_watermark(node: Node) -> None:
    partition = node.replicas.partitions[T0]
    await produce(node, T0, make_batch(2))
    await produce(node, T0, make_batch(2))
    partition.log.high_watermark = 2  # as if a follower had not caught up
    results = await node.fetch.fetch(fetch_params((T0, 0)))
    try:
        assert [h.base_offset for h in iter_batches(results[0].records.to_bytes())] == [0]
        assert results[0].high_watermark == 2 and results[0].log_end_offset == 4
    finally:
        close_results(results)
    [(error, data)] = await fetch_bytes(node, (T0, 3))
    assert (error, data) == (ErrorCode.NONE, b"")  # between the HW and the log end: empty


# A follower's long poll (replica_id set) is decided from offsets alone; a consumer's reads.
@pytest.mark.parametrize("replica_id", [None, OTHER], ids=["consumer", "follower"])
async def test_long_poll_returns_when_data_arrives(node: Node, replica_id: int | None) -> None:
    waiting = asyncio.create_task(
        node.fetch.fetch(
            fetch_params((T0, 0), (T1, 0), min_bytes=1, max_wait_ms=30_000, replica_id=replica_id)
        )
    )
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done() and len(node.purgatory) == 2
    await produce(node, T1, make_batch(2))
    results: list[FetchPartitionResult] = await asyncio.wait_for(waiting, 10)
    try:
        assert results[0].size == 0 and results[1].size > 0
    finally:
        close_results(results)
    assert len(node.purgatory) == 0


async def test_long_poll_waits_for_min_bytes(node: Node) -> None:
    small, big = make_batch(1), make_batch(1, value_size=5000)
    waiting = asyncio.create_task(
        node.fetch.fetch(fetch_params((T0, 0), min_bytes=len(small) + 100, max_wait_ms=30_000))
    )
    for _ in range(20):
        await asyncio.sleep(0)
    await produce(node, T0, small)
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()  # not enough yet
    await produce(node, T0, big)
    results = await asyncio.wait_for(waiting, 10)
    try:
        assert results[0].size == len(small) + len(big)
    finally:
        close_results(results)


async def test_long_poll_expires_with_what_there_is(node: Node) -> None:
    await produce(node, T0, make_batch(1))
    results = await node.fetch.fetch(fetch_params((T0, 0), min_bytes=1 << 20, max_wait_ms=20))
    try:
        assert results[0].error == ErrorCode.NONE and results[0].size > 0
    finally:
        close_results(results)


@pytest.mark.parametrize("replica_id", [None, OTHER], ids=["consumer", "follower"])
async def test_long_poll_ends_when_leadership_moves(node: Node, replica_id: int | None) -> None:
    waiting = asyncio.create_task(
        node.fetch.fetch(
            fetch_params((T0, 0), min_bytes=1, max_wait_ms=30_000, replica_id=replica_id)
        )
    )
    for _ in range(20):
        await asyncio.sleep(0)
    node.replicas.apply_image(
        image(
            topic("t", leaders=[OTHER, NODE], epoch=2, replicas=[[OTHER, NODE], [NODE]]), version=2
        )
    )
    [result] = await asyncio.wait_for(waiting, 10)
    assert result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_a_parked_follower_fetch_is_not_woken_by_news_for_no_one(node: Node) -> None:
    """The check at each append looks at offsets, and a fetch whose partitions all stand at
    their log end stays parked; a fetch offset past the log end is answered at once with the
    read's error."""
    await produce(node, T0, make_batch(2))
    waiting = asyncio.create_task(
        node.fetch.fetch(fetch_params((T0, 2), min_bytes=1, max_wait_ms=30_000, replica_id=OTHER))
    )
    for _ in range(20):
        await asyncio.sleep(0)
    node.replicas.purgatory.notify(T0)  # a wake-up with nothing new: still parked
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done() and len(node.purgatory) == 1
    await produce(node, T0, make_batch(3))
    results = await asyncio.wait_for(waiting, 10)
    try:
        assert results[0].error == ErrorCode.NONE
        assert [h.base_offset for h in iter_batches(results[0].records.to_bytes())] == [2]
    finally:
        close_results(results)
    [ahead] = await node.fetch.fetch(
        fetch_params((T0, 9), min_bytes=1, max_wait_ms=30_000, replica_id=OTHER)
    )
    assert ahead.error == ErrorCode.OFFSET_OUT_OF_RANGE


async def test_a_follower_answer_leaves_out_the_partitions_with_nothing_new(node: Node) -> None:
    """A follower that tells its high watermark (and log start) hears only about partitions
    where either differs, or that have records or an error; one that does not tell hears
    about every partition."""
    await produce(node, T0, make_batch(2))  # T0: high watermark 2 (no followers in the ISR)

    def follower_fetch(*parts: tuple[TopicPartition, int, int | None]) -> FetchParams:
        return FetchParams(
            partitions=[
                FetchPartitionData(tp, offset, 0, None, 0, None, known)
                for tp, offset, known in parts
            ],
            replica_id=OTHER,
        )

    async def answered(params: FetchParams) -> list[TopicPartition]:
        results = await node.fetch.fetch(params)
        close_results(results)
        return [r.tp for r in results]

    assert await answered(follower_fetch((T0, 2, 2), (T1, 0, 0))) == []
    assert await answered(follower_fetch((T0, 2, 1), (T1, 0, 0))) == [T0]  # a newer HW
    assert await answered(follower_fetch((T0, 0, 2), (T1, 0, 0))) == [T0]  # records
    assert await answered(follower_fetch((T0, 5, 2), (T1, 0, 0))) == [T0]  # an error
    assert await answered(follower_fetch((T0, 2, None), (T1, 0, None))) == [T0, T1]
    moved = FetchParams(
        partitions=[FetchPartitionData(T1, 0, 0, None, 3, None, 0)], replica_id=OTHER
    )
    assert await answered(moved) == [T1]  # its log start differs from the follower's


async def test_results_pin_segments_until_closed(node: Node) -> None:
    await produce(node, T0, make_batch(3))
    results = await node.fetch.fetch(fetch_params((T0, 0)))
    expected = results[0].records.to_bytes()
    node.replicas.apply_image(image(version=2))  # the topic is deleted meanwhile
    assert results[0].records.to_bytes() == expected
    close_results(results)
    assert results[0].records is None
