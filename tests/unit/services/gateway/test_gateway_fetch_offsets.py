"""Fetch, ListOffsets and DeleteRecords: routed like produce, long-poll parameters passed
through with one overall wait, sizes capped and shared, bad input refused."""

import asyncio

import pytest
from gateway_fakes import Harness

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import OffsetSpec, TopicPartition
from riverlog.services.gateway.fetch import FetchOptions, FetchPart, FetchPartResult
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
    assert (opts1.min_bytes, opts1.isolation_level) == (10, 1)
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


async def test_min_bytes_met_by_one_leader_cuts_the_other_long_polls_short(
    harness: Harness,
) -> None:
    calls: list[tuple[int, int]] = []

    async def fetch(node, options, parts, deadline):
        calls.append((node.node_id, options.max_wait_ms))
        if node.node_id == 2 and options.max_wait_ms > 0:
            await asyncio.sleep(30)  # a long poll with nothing to return
        records = b"x" * 10 if node.node_id == 1 else b""
        return [FetchPartResult(p.tp, records=records, high_watermark=node.node_id) for p in parts]

    harness.storage.fetch = fetch
    options = FetchOptions(max_wait_ms=20_000, min_bytes=5, max_bytes=1000)
    parts = [FetchPart(TopicPartition("t", 0), 0), FetchPart(TopicPartition("t", 1), 0)]
    results = await asyncio.wait_for(harness.fetcher.fetch(harness.ctx(30), options, parts), 5)
    assert [(r.records, r.high_watermark) for r in results] == [(b"x" * 10, 1), (b"", 2)]
    assert calls[-1] == (2, 0)  # asked again without waiting once min_bytes was met


async def test_single_leader_long_poll_is_passed_through(manual_harness: Harness) -> None:
    harness = manual_harness
    options = FetchOptions(max_wait_ms=250, min_bytes=100, max_bytes=1000)
    await harness.fetcher.fetch(harness.ctx(), options, [FetchPart(TopicPartition("u", 0), 0)])
    [(_, node, _, sent)] = harness.storage.calls
    assert (node, sent.max_wait_ms, sent.min_bytes) == (3, 250, 100)
