"""Offset and time indexes: lookups, fullness, truncation, trimming, reloading and the sanity
check that decides whether a file is trusted."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from riverlog.services.storage.log.index import CorruptIndexError
from riverlog.services.storage.log.offset_index import OffsetIndex, OffsetPosition
from riverlog.services.storage.log.time_index import TimeIndex, TimestampOffset

BASE = 1000


def offset_index(tmp_path: Path, size: int = 8 * 100) -> OffsetIndex:
    return OffsetIndex(tmp_path / f"{BASE:020d}.index", BASE, size)


def time_index(tmp_path: Path, size: int = 12 * 100) -> TimeIndex:
    return TimeIndex(tmp_path / f"{BASE:020d}.timeindex", BASE, size)


def test_new_offset_index_is_preallocated_and_empty(tmp_path: Path) -> None:
    index = offset_index(tmp_path, size=8 * 100 + 5)
    assert index.entries == 0
    assert index.max_entries == 100
    assert index.path.stat().st_size == 800  # rounded down to whole entries
    assert index.lookup(5000) == OffsetPosition(BASE, 0)
    index.close()


def test_offset_lookup_finds_largest_entry_at_or_below(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 51):
        index.append(BASE + i * 10, i * 4096)
    assert index.lookup(BASE) == OffsetPosition(BASE, 0)
    assert index.lookup(BASE + 9) == OffsetPosition(BASE, 0)
    assert index.lookup(BASE + 10) == OffsetPosition(BASE + 10, 4096)
    assert index.lookup(BASE + 255) == OffsetPosition(BASE + 250, 25 * 4096)
    assert index.lookup(10**9) == OffsetPosition(BASE + 500, 50 * 4096)
    assert index.lookup(BASE - 5) == OffsetPosition(BASE, 0)
    assert index.lookup_by_position(4096 * 3 + 1) == OffsetPosition(BASE + 30, 3 * 4096)
    assert index.lookup_by_position(10) == OffsetPosition(BASE, 0)
    index.close()


def test_offset_index_rejects_non_increasing_and_full(tmp_path: Path) -> None:
    index = offset_index(tmp_path, size=8 * 2)
    index.append(BASE + 5, 100)
    with pytest.raises(ValueError, match="not beyond"):
        index.append(BASE + 5, 200)
    index.append(BASE + 6, 200)
    assert index.is_full
    with pytest.raises(ValueError, match="full"):
        index.append(BASE + 7, 300)
    index.close()


def test_offset_index_truncate_to_drops_entries_at_or_above(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 11):
        index.append(BASE + i * 10, i * 100)
    index.truncate_to(BASE + 50)
    assert index.entries == 4
    assert index.last_entry == OffsetPosition(BASE + 40, 400)
    index.truncate_to(BASE + 35)
    assert index.entries == 3
    index.truncate_to(BASE)
    assert index.entries == 0
    index.close()


def test_offset_index_trim_and_reload(tmp_path: Path) -> None:
    index = offset_index(tmp_path)
    for i in range(1, 6):
        index.append(BASE + i, i * 100)
    index.close()
    assert index.path.stat().st_size == 5 * 8
    reopened = offset_index(tmp_path)
    assert reopened.entries == 5
    assert reopened.lookup(BASE + 3) == OffsetPosition(BASE + 3, 300)
    reopened.sanity_check(BASE + 100, 10_000)
    reopened.resize(800)  # made active again: room to append
    reopened.append(BASE + 6, 600)
    assert reopened.entries == 6
    reopened.close()


def test_time_index_appends_only_growing_timestamps_and_keeps_a_slot(tmp_path: Path) -> None:
    index = time_index(tmp_path, size=12 * 3)
    index.maybe_append(100, BASE + 1)
    index.maybe_append(100, BASE + 2)  # not larger: ignored
    index.maybe_append(90, BASE + 3)  # smaller: ignored
    assert index.entries == 1
    index.maybe_append(200, BASE + 4)
    assert index.is_full  # one slot is kept for the entry written on roll
    with pytest.raises(ValueError, match="full"):
        index.maybe_append(300, BASE + 5)
    index.maybe_append(300, BASE + 5, skip_full_check=True)
    assert index.entries == 3
    assert index.lookup(250) == TimestampOffset(200, BASE + 4)
    assert index.lookup(99) == TimestampOffset(-1, BASE)
    assert index.lookup(10**15) == TimestampOffset(300, BASE + 5)
    index.truncate_to(BASE + 4)
    assert index.last_entry == TimestampOffset(100, BASE + 1)
    index.close()


def test_time_index_on_sealed_file_grows_for_the_last_entry(tmp_path: Path) -> None:
    index = time_index(tmp_path)
    index.maybe_append(100, BASE + 1)
    index.trim_to_valid_size()
    index.maybe_append(200, BASE + 2, skip_full_check=True)
    assert index.entries == 2
    index.close()
    assert index.path.stat().st_size == 24


def write_entries(path: Path, fmt: str, entries: list[tuple[int, int]]) -> None:
    path.write_bytes(b"".join(struct.pack(fmt, *e) for e in entries))


@pytest.mark.parametrize(
    ("entries", "upper", "log_size", "why"),
    [
        ([(1, 100), (1, 200)], None, 1000, "not sorted"),
        ([(2, 100), (1, 200)], None, 1000, "not sorted"),
        ([(1, 200), (2, 100)], None, 1000, "not sorted"),
        ([(1, 100), (50, 200)], BASE + 50, 1000, "beyond the segment"),
        ([(1, 100), (2, 5000)], None, 1000, "beyond the log"),
        ([(1, 100), (0, 0), (0, 0)], None, 1000, "not sorted"),  # preallocated zeros
    ],
)
def test_offset_index_sanity_check_rejects(
    tmp_path: Path, entries: list[tuple[int, int]], upper: int | None, log_size: int, why: str
) -> None:
    path = tmp_path / f"{BASE:020d}.index"
    write_entries(path, ">II", entries)
    index = OffsetIndex(path, BASE, 800)
    with pytest.raises(CorruptIndexError, match=why):
        index.sanity_check(upper, log_size)
    index.close()


def test_index_sanity_check_rejects_partial_entry(tmp_path: Path) -> None:
    path = tmp_path / f"{BASE:020d}.index"
    path.write_bytes(struct.pack(">II", 1, 100) + b"\x00\x01")
    index = OffsetIndex(path, BASE, 800)
    with pytest.raises(CorruptIndexError, match="multiple"):
        index.sanity_check(None, 1000)
    index.delete()
    assert not path.exists()


def test_time_index_sanity_check(tmp_path: Path) -> None:
    path = tmp_path / f"{BASE:020d}.timeindex"
    write_entries(path, ">qI", [(100, 1), (200, 1), (300, 7)])
    index = TimeIndex(path, BASE, 1200)
    index.sanity_check(BASE + 8, 0)
    with pytest.raises(CorruptIndexError, match="beyond the segment"):
        index.sanity_check(BASE + 7, 0)
    index.close()
    write_entries(path, ">qI", [(100, 1), (50, 2)])
    index = TimeIndex(path, BASE, 1200)
    with pytest.raises(CorruptIndexError, match="not sorted"):
        index.sanity_check(None, 0)
    index.close()


def test_tiny_index_size_holds_no_entries(tmp_path: Path) -> None:
    index = offset_index(tmp_path, size=4)  # the smallest segment.index.bytes
    assert index.max_entries == 0
    assert index.is_full
    assert index.lookup(BASE + 10) == OffsetPosition(BASE, 0)
    index.close()
    tindex = time_index(tmp_path, size=4)
    assert tindex.is_full
    tindex.maybe_append(5, BASE, skip_full_check=True)
    assert tindex.entries == 1
    tindex.close()
