"""Reads: whole batches within max_bytes, the max_offset (high watermark) bound,
min_one_message, offset range errors, spans across segments, and fetch slices that outlive
their segments. Also offset_for_timestamp."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from storage_log_testkit import (
    TS,
    all_batches,
    config,
    fill,
    headers,
    make_batch,
    offsets_in,
    open_log,
    read_bytes,
)

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.storage.log import PartitionLog


@pytest.fixture
def log(tmp_path: Path, clock: ManualClock) -> PartitionLog:
    """10 batches of 3 records (offsets 0..29), each batch indexed."""
    log = open_log(tmp_path, clock, config(index_interval_bytes=0))
    fill(log, 10, count=3)
    return log


def test_read_from_offset_returns_the_batch_holding_it(log: PartitionLog) -> None:
    batches = all_batches(log)
    assert read_bytes(log, 0) == b"".join(batches)
    assert read_bytes(log, 4) == b"".join(batches[1:])  # 4 is inside batch [3, 5]
    assert read_bytes(log, 29) == batches[-1]
    assert headers(read_bytes(log, 13))[0].base_offset == 12


def test_read_at_log_end_is_empty(log: PartitionLog) -> None:
    with log.read(30, 1000) as fetched:
        assert fetched.size == 0
        assert fetched.ranges == ()
        assert fetched.to_bytes() == b""


@pytest.mark.parametrize("offset", [-1, 31, 1000])
def test_read_outside_the_log_is_out_of_range(log: PartitionLog, offset: int) -> None:
    with pytest.raises(RiverlogError) as caught:
        log.read(offset, 1000)
    assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_read_never_exceeds_max_bytes_and_returns_whole_batches(log: PartitionLog) -> None:
    size = len(all_batches(log)[0])
    for max_bytes in (size, size + 1, 2 * size - 1, 2 * size, 5 * size + 7):
        data = read_bytes(log, 0, max_bytes)
        assert len(data) == (max_bytes // size) * size
        assert len(headers(data)) == max_bytes // size


def test_min_one_message(log: PartitionLog) -> None:
    size = len(all_batches(log)[0])
    assert len(read_bytes(log, 3, 10)) == size  # one whole batch though bigger than 10
    assert read_bytes(log, 3, 10, min_one_message=False) == b""
    assert len(read_bytes(log, 3, 0)) == size


def test_max_offset_excludes_batches_at_or_beyond_it(log: PartitionLog) -> None:
    assert offsets_in(read_bytes(log, 0, max_offset=9)) == list(range(9))
    # 10 is inside batch [9, 11]: that whole batch holds uncommitted records, so it stays out.
    assert offsets_in(read_bytes(log, 0, max_offset=10)) == list(range(9))
    assert read_bytes(log, 9, max_offset=9) == b""
    assert read_bytes(log, 9, max_offset=11) == b""
    assert read_bytes(log, 20, max_offset=5) == b""
    assert offsets_in(read_bytes(log, 0, max_offset=30)) == list(range(30))


def test_read_spans_segments(tmp_path: Path, clock: ManualClock) -> None:
    batch_size = len(make_batch(1))
    log = open_log(tmp_path, clock, config(segment_bytes=batch_size * 2))
    fill(log, 9)
    assert log.segment_count == 5
    assert offsets_in(read_bytes(log, 1)) == list(range(1, 9))
    assert offsets_in(read_bytes(log, 1, batch_size * 3)) == [1, 2, 3]
    assert offsets_in(read_bytes(log, 1, max_offset=6)) == [1, 2, 3, 4, 5]
    with log.read(1, 1 << 20) as fetched:
        assert [r.size for r in fetched.ranges] == [
            batch_size,
            2 * batch_size,
            2 * batch_size,
            2 * batch_size,
            batch_size,
        ]
        assert fetched.size == 8 * batch_size


def test_fetch_slice_ranges_work_with_sendfile(log: PartitionLog, tmp_path: Path) -> None:
    out_path = tmp_path / "out"
    with log.read(6, 1 << 20) as fetched, open(out_path, "wb") as out:
        for r in fetched.ranges:
            sent = 0
            while sent < r.size:
                sent += os.sendfile(out.fileno(), r.fd, r.position + sent, r.size - sent)
        expected = fetched.to_bytes()
    assert out_path.read_bytes() == expected
    assert offsets_in(expected) == list(range(6, 30))


def test_fetch_slice_survives_segment_deletion(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(segment_bytes=len(make_batch(1)) * 2))
    fill(log, 6)
    fetched = log.read(0, 1 << 20)
    expected = fetched.to_bytes()
    first_log_file = log.segments[0].log.path
    assert log.delete_records(4) == 4
    assert not first_log_file.exists()
    log.delete()
    assert fetched.to_bytes() == expected  # descriptors pinned by the slice
    fetched.close()
    with pytest.raises(ValueError):
        fetched.to_bytes()


def test_read_many_small_batches_uses_the_sparse_index(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(index_interval_bytes=1000))
    fill(log, 500)
    assert 0 < log.active_segment.offset_index.entries < 500
    for offset in (0, 1, 17, 250, 251, 499):
        data = read_bytes(log, offset, 200)
        assert headers(data)[0].base_offset == offset
    sizes = [len(b) for b in all_batches(log)]
    for limit in (sum(sizes[100:140]), sum(sizes[100:140]) + 3, sum(sizes[100:141]) - 1):
        assert len(read_bytes(log, 100, limit)) == sum(sizes[100:140])


def test_offset_for_timestamp(tmp_path: Path, clock: ManualClock) -> None:
    batch_size = len(make_batch(5))
    log = open_log(tmp_path, clock, config(segment_bytes=batch_size * 3, index_interval_bytes=0))
    for i in range(10):  # batch i: offsets 5i..5i+4, timestamps TS+100i .. TS+100i+4
        log.append_as_leader(make_batch(5, ts=TS + 100 * i), 0)
    log.high_watermark = log.log_end_offset
    assert log.segment_count == 4
    assert log.offset_for_timestamp(0) == (0, TS)
    assert log.offset_for_timestamp(TS) == (0, TS)
    assert log.offset_for_timestamp(TS + 3) == (3, TS + 3)
    assert log.offset_for_timestamp(TS + 5) == (5, TS + 100)
    assert log.offset_for_timestamp(TS + 402) == (22, TS + 402)
    assert log.offset_for_timestamp(TS + 904) == (49, TS + 904)
    assert log.offset_for_timestamp(TS + 905) is None
    log.delete_records(12)
    assert log.offset_for_timestamp(TS) == (12, TS + 202)


def test_offset_for_timestamp_out_of_order_create_times(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    for ts in (TS + 50, TS + 10, TS + 70, TS + 30):
        log.append_as_leader(make_batch(1, ts=ts), 0)
    assert log.offset_for_timestamp(TS + 20) == (0, TS + 50)
    assert log.offset_for_timestamp(TS + 60) == (2, TS + 70)


def test_offset_for_timestamp_log_append_time(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(message_timestamp_type="LogAppendTime"))
    for _ in range(4):
        log.append_as_leader(make_batch(3, ts=1), 0)
        clock.advance(1000)
    assert log.offset_for_timestamp(TS + 1) == (3, TS + 1000)
    assert log.offset_for_timestamp(TS + 3000) == (9, TS + 3000)
    assert log.offset_for_timestamp(TS + 3001) is None


@st.composite
def read_cases(
    draw: st.DrawFn,
) -> tuple[list[tuple[int, int]], int, int, list[tuple[int, int, int | None, bool]]]:
    batches = draw(
        st.lists(st.tuples(st.integers(1, 4), st.integers(0, 300)), min_size=1, max_size=30)
    )
    segment_bytes = draw(st.integers(1500, 5000))
    interval = draw(st.sampled_from([0, 200, 4096]))
    end = sum(count for count, _ in batches)
    reads = draw(
        st.lists(
            st.tuples(
                st.integers(0, end),
                st.integers(0, 6000),
                st.one_of(st.none(), st.integers(0, end)),
                st.booleans(),
            ),
            min_size=1,
            max_size=20,
        )
    )
    return batches, segment_bytes, interval, reads


@settings(max_examples=40, deadline=None)
@given(read_cases())
def test_reads_match_a_model(
    case: tuple[list[tuple[int, int]], int, int, list[tuple[int, int, int | None, bool]]],
) -> None:
    batches, segment_bytes, interval, reads = case
    with tempfile.TemporaryDirectory() as tmp:
        log = open_log(
            Path(tmp),
            ManualClock(TS),
            config(segment_bytes=segment_bytes, index_interval_bytes=interval),
        )
        for i, (count, value_size) in enumerate(batches):
            log.append_as_leader(make_batch(count, value_size=value_size, tag=i), 0)
        stored = all_batches(log)
        model = [(h.base_offset, h.last_offset, b) for b in stored for h in headers(b)]
        for fetch_offset, max_bytes, max_offset, min_one in reads:
            expected: list[bytes] = []
            total = 0
            for _, last, batch in model:
                if last < fetch_offset:
                    continue
                if max_offset is not None and last >= max_offset:
                    break
                if total + len(batch) > max_bytes and (expected or not min_one):
                    break
                expected.append(batch)
                total += len(batch)
            got = read_bytes(
                log, fetch_offset, max_bytes, max_offset=max_offset, min_one_message=min_one
            )
            assert got == b"".join(expected)
        log.close()
