"""Reads below the local log start (remote/reader.py), on segments a real partition log wrote
and the remote log manager copied to a directory store: the same bytes as a local read from
any offset (inside a batch too), with the byte budget, the first batch whole, the upper bound,
one segment per read, through a bounded cache; a missing or corrupt remote segment is a clear
error, never other bytes."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_log_testkit import TP, make_batch, open_log, read_bytes
from tiered_testkit import manager, tiered

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.header import iter_batches
from riverlog.services.storage.log import PartitionLog
from riverlog.services.storage.remote.reader import ChunkCache, RemoteLogReader
from riverlog.services.storage.remote.remote_log_manager import PartitionTask, RemoteLogManager


@pytest.fixture
def multi(tmp_path: Path, clock: ManualClock) -> PartitionLog:
    """Batches of 3 records (some offsets are inside a batch), 3 batches a segment."""
    log = open_log(tmp_path / "data", clock, tiered(**{"segment.bytes": 700}))
    for i in range(20):
        log.append_as_leader(make_batch(3, ts=clock.time_ms(), value_size=30, tag=i), 0)
        log.high_watermark = log.log_end_offset
    return log


async def tier(tmp_path: Path, clock: ManualClock, log: PartitionLog) -> RemoteLogManager:
    rlm = manager(tmp_path / "tier", clock)
    await rlm.run_once(PartitionTask(log, 1))
    assert log.apply_retention(clock.time_ms()) > 0
    return rlm


async def test_every_offset_reads_the_same_bytes_as_locally(
    tmp_path: Path, clock: ManualClock, multi: PartitionLog
) -> None:
    local = {o: read_bytes(multi, o, 1 << 20) for o in range(multi.active_segment.base_offset)}
    segment_end = {s.base_offset: s.next_offset for s in multi.segments}
    rlm = await tier(tmp_path, clock, multi)
    reader = RemoteLogReader(rlm.metadata, rlm.store)
    for offset, expected in local.items():
        got = await reader.read(TP, offset, 1 << 20, multi.high_watermark)
        # One remote segment per read: the local read's prefix up to that segment's end.
        base = max(b for b in segment_end if b <= offset)
        assert got.to_bytes() == _prefix_until(expected, segment_end[base]), offset
        assert got.next_offset == segment_end[base]
    assert reader.cache.hits > reader.cache.misses


def _prefix_until(data: bytes, next_offset: int) -> bytes:
    size = sum(h.size for h in iter_batches(data) if h.next_offset <= next_offset)
    return data[:size]


async def test_budget_first_batch_and_upper_bound(
    tmp_path: Path, clock: ManualClock, multi: PartitionLog
) -> None:
    first = iter_batches(read_bytes(multi, 0))
    rlm = await tier(tmp_path, clock, multi)
    reader = RemoteLogReader(rlm.metadata, rlm.store)
    assert (await reader.read(TP, 0, 1, 100)).size == first[0].size  # the first one whole
    assert (await reader.read(TP, 0, 1, 100, min_one_message=False)).size == 0
    two = first[0].size + first[1].size
    assert (await reader.read(TP, 0, two + 1, 100)).size == two
    # No batch holding an offset at or past the bound (3: inside the second batch).
    assert (await reader.read(TP, 0, 1 << 20, 4)).size == first[0].size
    assert (await reader.read(TP, 0, 1 << 20, 3)).size == first[0].size


async def test_a_missing_or_corrupt_remote_segment_is_a_clear_error(
    tmp_path: Path, clock: ManualClock, multi: PartitionLog
) -> None:
    rlm = await tier(tmp_path, clock, multi)
    state = rlm.metadata.state(TP)
    assert state is not None
    first, second = state.readable_segments()[:2]
    root = tmp_path / "tier"
    corrupt = root / first.segment_id.object_name(".log")
    data = bytearray(corrupt.read_bytes())
    data[16] = 7  # the magic byte of the first batch
    corrupt.write_bytes(bytes(data))
    reader = RemoteLogReader(rlm.metadata, rlm.store)
    with pytest.raises(RiverlogError, match=r"magic|does not belong") as err:
        await reader.read(TP, first.start_offset, 1 << 20, 1000)
    assert err.value.code == ErrorCode.CORRUPT_MESSAGE
    (root / second.segment_id.object_name(".log")).unlink()
    with pytest.raises(RiverlogError, match="missing") as err:
        await reader.read(TP, second.start_offset, 1 << 20, 1000)
    assert err.value.code == ErrorCode.KAFKA_STORAGE_ERROR


async def test_an_offset_no_remote_segment_holds_is_out_of_range(
    tmp_path: Path, clock: ManualClock, multi: PartitionLog
) -> None:
    rlm = await tier(tmp_path, clock, multi)
    reader = RemoteLogReader(rlm.metadata, rlm.store)
    with pytest.raises(RiverlogError) as err:
        await reader.read(TP, 10_000, 100, 20_000)
    assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_the_chunk_cache_is_bounded_and_evicts_the_least_recently_used() -> None:
    cache = ChunkCache(10)
    cache.put(("a", 0), b"1234")
    cache.put(("b", 0), b"5678")
    assert cache.get(("a", 0)) == b"1234"
    cache.put(("c", 0), b"90ab")  # evicts b, the least recently used
    assert cache.get(("b", 0)) is None and cache.size_bytes == 8
    cache.put(("d", 0), b"x" * 11)  # larger than the whole cache: not kept
    assert cache.get(("d", 0)) is None
    assert (cache.hits, cache.misses) == (1, 2)


async def test_offsets_by_timestamp_match_the_local_search(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_log(tmp_path / "data", clock, tiered(**{"segment.bytes": 700}))
    start = clock.time_ms()
    for i in range(20):  # batches of 3 records, 1 ms apart, batches 10 ms apart
        log.append_as_leader(make_batch(3, ts=clock.time_ms(), value_size=30, tag=i), 0)
        log.high_watermark = log.log_end_offset
        clock.advance(10)
    probes = [start - 5, start, start + 1, start + 2, start + 3, start + 55, start + 121]
    expected = {ts: log.offset_for_timestamp(ts) for ts in probes}
    rlm = await tier(tmp_path, clock, log)
    reader = RemoteLogReader(rlm.metadata, rlm.store)
    local_start = log.local_log_start_offset
    for ts, want in expected.items():
        assert want is not None
        if want[0] < local_start:
            assert await reader.offset_for_timestamp(TP, ts, 0) == want, ts
        else:
            assert await reader.offset_for_timestamp(TP, ts, 0) is None, ts
    # From a later start offset only.
    assert await reader.offset_for_timestamp(TP, start, 4) == (4, start + 11)  # batch [3, 5]
