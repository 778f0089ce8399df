"""Fetch, ListOffsets and DeleteRecords: routed like produce, long-poll parameters passed
through with one overall wait, sizes capped and shared, bad input refused."""

import asyncio

import pytest
from gateway_fakes import Harness

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import OffsetSpec, TopicPartition
from riverlog.services.gateway.fetch import (
    FetchOptions,
    FetchPart,
    FetchPartResult,
    not_waited_for,
)
from riverlog.services.gateway.offsets import (
    DeleteRecordsPart,
    ListOffsetsPart,
)


async def test_fetch_splits_by_leader_and_passes_long_poll(manual_harness: Harness) -> None:
    harness = manual_harness
    parts = [
        FetchPart(TopicPartition("t", 0), 5, 1000),
        FetchPart(TopicPartition("t", 1), 0, 0),
        FetchPart(TopicPartition("t", 2), 7, 2000, current_leader_epoch=3),
    ]
    options = FetchOptions(max_wait_ms=400, min_bytes=10, max_bytes=100_000, isolation_level=1)
    results = await harness.fetcher.fetch(harness.ctx(), options, parts)
    assert [(r.tp.partition, r.high_watermark) for r in results] == [(0, 1), (1, 2), (2, 1)]
    calls = {node: (items, opts) for _, node, items, opts in harness.storage.calls}
    items1, opts1 = calls[1]
    assert [(i.tp.partition, i.fetch_offset, i.partition_max_bytes) for i in items1] == [
        (0, 5, 1000),
        (2, 7, 2000),
    ]
    assert items1[1].current_leader_epoch == 3
    assert opts1.max_wait_ms == 400  # the harness's manual clock stands still
    # each of the two leaders is asked for its share of min_bytes (rounded up)
    assert (opts1.min_bytes, opts1.isolation_level) == (5, 1)
    # two leaders share max_bytes; a leader never gets more than its partitions asked for
    assert opts1.max_bytes == 3000
    items2, opts2 = calls[2]
    assert items2[0].partition_max_bytes == 100_000  # 0: the default, within max_bytes
    assert opts2.max_bytes == 50_000


async def test_fetch_caps_huge_sizes(harness: Harness) -> None:
    options = FetchOptions(max_bytes=2**31 - 1)
    await harness.fetcher.fetch(
        harness.ctx(), options, [FetchPart(TopicPartition("t", 0), 0, 2**31 - 1)]
    )
    [(_, _, items, opts)] = harness.storage.calls
    assert opts.max_bytes <= harness.config.fetch_max_bytes
    assert items[0].partition_max_bytes <= harness.config.fetch_max_bytes


@pytest.mark.parametrize(
    ("options", "code"),
    [
        (FetchOptions(max_bytes=0), ErrorCode.INVALID_FETCH_SIZE),
        (FetchOptions(max_bytes=-1), ErrorCode.INVALID_FETCH_SIZE),
        (FetchOptions(max_bytes=10, max_wait_ms=-1), ErrorCode.INVALID_REQUEST),
        (FetchOptions(max_bytes=10, min_bytes=-1), ErrorCode.INVALID_REQUEST),
        (FetchOptions(max_bytes=10, isolation_level=9), ErrorCode.INVALID_REQUEST),
        (FetchOptions(max_bytes=10, replica_id=2), ErrorCode.INVALID_REQUEST),
    ],
)
async def test_fetch_bad_requests(harness: Harness, options: FetchOptions, code: ErrorCode) -> None:
    with pytest.raises(RiverlogError) as info:
        await harness.fetcher.fetch(harness.ctx(), options, [FetchPart(TopicPartition("t", 0), 0)])
    assert info.value.code == code
    assert harness.storage.calls == []


async def test_fetch_bad_items(harness: Harness) -> None:
    parts = [
        FetchPart(TopicPartition("t", 0), -3),
        FetchPart(TopicPartition("t", 1), 0, -1),
        FetchPart(TopicPartition("??", 0), 0),
        FetchPart(TopicPartition("u", 0), 0),
    ]
    results = await harness.fetcher.fetch(harness.ctx(), FetchOptions(max_bytes=1000), parts)
    assert [r.error_code for r in results] == [
        ErrorCode.INVALID_OFFSET,
        ErrorCode.INVALID_FETCH_SIZE,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.NONE,
    ]
    assert harness.storage.nodes_called("fetch") == [3]


async def test_list_offsets_routed_and_checked(harness: Harness) -> None:
    parts = [
        ListOffsetsPart(TopicPartition("t", 1), OffsetSpec.EARLIEST),
        ListOffsetsPart(TopicPartition("t", 0), OffsetSpec.TIMESTAMP, -5),
        ListOffsetsPart(TopicPartition("t", 0), 42),
        ListOffsetsPart(TopicPartition("u", 0), OffsetSpec.TIMESTAMP, 1234),
    ]
    results = await harness.offsets.list_offsets(harness.ctx(), 0, parts)
    assert [(r.error_code, r.offset) for r in results] == [
        (0, 2),
        (ErrorCode.INVALID_TIMESTAMP, -1),
        (ErrorCode.INVALID_REQUEST, -1),
        (0, 3),
    ]
    with pytest.raises(RiverlogError):
        await harness.offsets.list_offsets(harness.ctx(), 5, parts)


async def test_delete_records_routed_and_checked(harness: Harness) -> None:
    parts = [
        DeleteRecordsPart(TopicPartition("t", 0), 10),
        DeleteRecordsPart(TopicPartition("t", 1), -1),
        DeleteRecordsPart(TopicPartition("t", 2), -2),
    ]
    results = await harness.offsets.delete_records(harness.ctx(), 0, parts)
    assert [(r.error_code, r.low_watermark) for r in results] == [
        (0, 10),
        (0, -1),
        (ErrorCode.INVALID_OFFSET, -1),
    ]
    timeouts = {opts for _, _, _, opts in harness.storage.calls}
    assert all(0 < t <= harness.config.request_timeout_ms for t in timeouts)
    with pytest.raises(RiverlogError):
        await harness.offsets.delete_records(harness.ctx(), -1, parts)


async def test_min_bytes_met_by_one_leader_abandons_the_other_long_polls(
    harness: Harness,
) -> None:
    """The request returns with leader 1's records; leader 2's long poll is neither cancelled
    (that would close its zero-copy connection) nor asked again: its partition comes back
    empty, and the poll finishes on its own later, its answer dropped."""
    calls: list[tuple[int, int]] = []
    release = asyncio.Event()
    finished: list[int] = []

    async def fetch(node, options, parts, deadline):
        calls.append((node.node_id, options.max_wait_ms))
        if node.node_id == 2:
            await release.wait()  # a long poll with nothing to return, yet
            finished.append(node.node_id)
            records = b"late"
        else:
            records = b"x" * 10
        return [FetchPartResult(p.tp, records=records, high_watermark=node.node_id) for p in parts]

    harness.storage.fetch = fetch
    options = FetchOptions(max_wait_ms=20_000, min_bytes=5, max_bytes=1000)
    parts = [FetchPart(TopicPartition("t", 0), 0), FetchPart(TopicPartition("t", 1), 4)]
    results = await asyncio.wait_for(harness.fetcher.fetch(harness.ctx(30), options, parts), 5)
    assert results == [
        FetchPartResult(TopicPartition("t", 0), records=b"x" * 10, high_watermark=1),
        FetchPartResult(TopicPartition("t", 1)),  # empty, no error: the position stays at 4
    ]
    assert [node for node, _ in calls] == [1, 2]  # nobody asked again
    release.set()
    async with asyncio.timeout(5):
        while harness.fetcher.abandoned_polls:
            await asyncio.sleep(0.01)
    assert finished == [2]  # ran to its end rather than being cancelled


async def test_an_answer_that_arrives_with_min_bytes_met_elsewhere_is_kept(
    harness: Harness,
) -> None:
    """Both leaders answer in the same step: each answer stands, nothing is dropped."""

    async def fetch(node, options, parts, deadline):
        return [FetchPartResult(p.tp, records=b"y" * 6, high_watermark=7) for p in parts]

    harness.storage.fetch = fetch
    options = FetchOptions(max_wait_ms=20_000, min_bytes=5, max_bytes=1000)
    parts = [FetchPart(TopicPartition("t", 0), 0), FetchPart(TopicPartition("t", 1), 0)]
    results = await harness.fetcher.fetch(harness.ctx(30), options, parts)
    assert [(r.records, r.high_watermark) for r in results] == [(b"y" * 6, 7)] * 2
    assert harness.fetcher.abandoned_polls == 0


def test_partitions_not_waited_for_are_answered_empty_at_their_position() -> None:
    batch = [FetchPart(TopicPartition("t", 1), 4, 100), FetchPart(TopicPartition("u", 0), 9)]
    assert not_waited_for(batch) == [
        FetchPartResult(TopicPartition("t", 1)),
        FetchPartResult(TopicPartition("u", 0)),
    ]
    for result in not_waited_for(batch):
        assert (result.error_code, result.records, result.aborted_transactions) == (0, b"", ())
        # No offsets the client could mistake for a new position or a truncation.
        assert (result.high_watermark, result.log_start_offset, result.log_end_offset) == (
            -1,
            -1,
            -1,
        )


async def test_single_leader_long_poll_is_passed_through(manual_harness: Harness) -> None:
    harness = manual_harness
    options = FetchOptions(max_wait_ms=250, min_bytes=100, max_bytes=1000)
    await harness.fetcher.fetch(harness.ctx(), options, [FetchPart(TopicPartition("u", 0), 0)])
    [(_, node, _, sent)] = harness.storage.calls
    assert (node, sent.max_wait_ms, sent.min_bytes) == (3, 250, 100)
