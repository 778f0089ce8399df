"""LogSegment on its own: file names, appends and indexing, lookups, read ranges, recovery
and truncation, sealing."""

from __future__ import annotations

import os
from pathlib import Path

from storage_log_testkit import TS, make_batch, split

from riverlog.common.clock import ManualClock
from riverlog.common.records.header import parse_header, set_base_offset
from riverlog.services.storage.log.segment import AppendedBatch, LogSegment

BASE = 100


def segment(tmp_path: Path, interval: int = 0) -> LogSegment:
    return LogSegment.open(tmp_path, BASE, 4096, interval, TS)


def append(seg: LogSegment, count: int, ts: int) -> bytes:
    """Append one batch of `count` records at the segment's next offset; returns its bytes."""
    batch = bytearray(make_batch(count, ts=ts))
    set_base_offset(batch, 0, seg.next_offset)
    header = parse_header(batch)
    seg.append(batch, [AppendedBatch(0, len(batch), header.last_offset, header.max_timestamp)])
    return bytes(batch)


def test_files_are_named_by_base_offset(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "00000000000000000100.index",
        "00000000000000000100.log",
        "00000000000000000100.timeindex",
    ]
    assert (seg.size, seg.next_offset, seg.max_timestamp) == (0, BASE, -1)
    seg.close()


def test_append_indexes_and_lookups(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    batches = [append(seg, 3, TS + 10 * i) for i in range(5)]  # offsets 100..114
    assert seg.next_offset == 115
    assert seg.max_timestamp == TS + 42
    # The first batch needs no entry; every later one gets one (index.interval.bytes = 0).
    assert seg.offset_index.entries == 4
    assert seg.offset_index.lookup(107).offset == 105
    info = seg.translate_offset(107)
    assert info is not None
    assert (info.base_offset, info.last_offset, info.position) == (106, 108, 2 * len(batches[0]))
    assert seg.translate_offset(115) is None
    size = len(batches[0])
    assert seg.read_range(104, 2 * size, None, True) == (size, 2 * size)
    assert seg.read_range(104, 10, None, True) == (size, size)
    assert seg.read_range(104, 10, None, False) == (size, 0)
    assert seg.read_range(100, 10 * size, 106, True) == (0, 2 * size)
    assert seg.find_offset_by_timestamp(TS + 21, 0) == (107, TS + 21)
    assert seg.find_offset_by_timestamp(TS + 21, 110) == (110, TS + 31)
    assert seg.find_offset_by_timestamp(TS + 43, 0) is None
    seg.close()


def test_recover_rebuilds_indexes_and_cuts_at_the_first_invalid_batch(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    batches = [append(seg, 2, TS + i) for i in range(6)]
    entries = seg.offset_index.entries
    seg.offset_index.reset()
    assert seg.recover() == 0
    assert seg.offset_index.entries == entries
    assert seg.max_timestamp == TS + 6
    with open(seg.log.path, "r+b") as f:
        f.seek(len(batches[0]) * 4 + 70)
        f.write(b"\xff")  # batch 4's CRC now fails
    assert seg.recover() == len(batches[0]) * 2
    assert seg.next_offset == 108
    assert split(seg.log.path.read_bytes()) == batches[:4]
    assert seg.translate_offset(108) is None
    seg.close()


def test_recover_rejects_offsets_that_do_not_follow(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    append(seg, 2, TS)
    batch = bytearray(make_batch(1, ts=TS))
    set_base_offset(batch, 0, 105)  # a gap: 102..104 missing
    seg.append(batch, [AppendedBatch(0, len(batch), 105, TS)])
    assert seg.recover(contiguous=False) == 0
    assert seg.recover() == len(batch)
    assert seg.next_offset == 102
    seg.close()


def test_truncate_to_and_tail_state(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    batches = [append(seg, 2, TS + 100 * i) for i in range(5)]
    assert seg.truncate_to(105) == 3 * len(batches[0])  # batch [104, 105] goes too
    assert (seg.next_offset, seg.size, seg.max_timestamp) == (104, 2 * len(batches[0]), TS + 101)
    assert seg.truncate_to(200) == 0
    assert seg.truncate_to(BASE) == 2 * len(batches[0])
    assert (seg.next_offset, seg.size) == (BASE, 0)
    seg.close()


def test_seal_and_reopen(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    for i in range(4):
        append(seg, 1, TS + 10 * i)
    seg.on_become_inactive()
    assert seg.time_index.last_entry.timestamp == TS + 30
    assert seg.offset_index.path.stat().st_size == seg.offset_index.entries * 8
    seg.close()
    again = LogSegment.open(tmp_path, BASE, 4096, 0, TS)
    again.sanity_check(upper_bound_offset=104)
    assert (again.next_offset, again.max_timestamp, again.largest_timestamp) == (
        104,
        TS + 30,
        TS + 30,
    )
    again.close()


def test_largest_timestamp_falls_back_to_the_file_time(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    append(seg, 1, -1)  # a batch without timestamps
    os.utime(seg.log.path, ns=(TS * 1_000_000, TS * 1_000_000))
    assert seg.max_timestamp == -1
    assert seg.largest_timestamp == TS
    seg.close()


def test_should_roll(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    assert not seg.should_roll(10**6, TS, BASE, TS + 10**9, 100, 1)  # empty: never
    size = len(append(seg, 1, TS))
    assert not seg.should_roll(50, TS + 5, 101, TS, size + 50, 10)
    assert seg.should_roll(51, TS + 5, 101, TS, size + 50, 10)  # segment.bytes
    assert seg.should_roll(1, TS + 11, 101, TS, 10**6, 10)  # segment.ms since the first batch
    assert seg.should_roll(1, TS, BASE + 2**32, TS, 10**6, 10)  # relative offset overflow
    seg.close()


def test_create_empties_leftover_files(tmp_path: Path) -> None:
    seg = segment(tmp_path)
    for i in range(3):
        append(seg, 1, TS + i)
    seg.close()
    fresh = LogSegment.create(tmp_path, BASE, 4096, 0, ManualClock(TS))
    assert (fresh.size, fresh.next_offset, fresh.max_timestamp) == (0, BASE, -1)
    assert fresh.offset_index.entries == fresh.time_index.entries == 0
    fresh.close()
