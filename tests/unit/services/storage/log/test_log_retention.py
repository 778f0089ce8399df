"""Retention by time and by size, DeleteRecords, and follower truncation: which segments go,
where the log start offset moves, and that the active segment and uncommitted data stay."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_log_testkit import (
    TS,
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

BATCH = len(make_batch(1))


def segmented(tmp_path: Path, clock: ManualClock, **overrides: object) -> PartitionLog:
    """12 one-record batches, 2 per segment (6 segments); batch i has timestamp TS + 1000 i."""
    log = open_log(tmp_path, clock, config(segment_bytes=BATCH * 2, **overrides))
    fill(log, 12, clock=clock, advance_ms=1000)
    assert log.segment_count == 6
    return log


def test_retention_ms_deletes_old_segments(tmp_path: Path, clock: ManualClock) -> None:
    log = segmented(tmp_path, clock, retention_ms=5000)
    now = TS + 10_000  # largest timestamps: TS + 1000, 3000, 5000 (exactly 5000 ms old)
    assert log.apply_retention(now) == 2  # 9000 and 7000 ms old
    assert [s.base_offset for s in log.segments] == [4, 6, 8, 10]
    assert log.log_start_offset == 4
    assert offsets_in(read_bytes(log, 4)) == list(range(4, 12))
    with pytest.raises(RiverlogError) as caught:
        log.read(3, 100)
    assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert not (log.dir / "00000000000000000000.log").exists()
    assert not (log.dir / "00000000000000000000.index").exists()
    assert not (log.dir / "00000000000000000002.timeindex").exists()


def test_retention_ms_never_deletes_the_active_segment(tmp_path: Path, clock: ManualClock) -> None:
    log = segmented(tmp_path, clock, retention_ms=1)
    assert log.apply_retention(TS + 10**9) == 5
    assert log.segment_count == 1
    assert log.active_segment.base_offset == 10
    assert log.log_start_offset == 10
    assert log.apply_retention(TS + 10**9) == 0
    fill(log, 1, clock=clock)
    assert log.log_end_offset == 13


def test_infinite_retention_and_compact_policy_keep_everything(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = segmented(tmp_path, clock, retention_ms=-1, retention_bytes=-1)
    assert log.apply_retention(TS + 10**12) == 0
    log.update_config(config(retention_ms=1, retention_bytes=1, cleanup_policy="compact"))
    assert log.apply_retention(TS + 10**12) == 0
    assert log.segment_count == 6


def test_retention_bytes(tmp_path: Path, clock: ManualClock) -> None:
    log = segmented(tmp_path, clock, retention_bytes=BATCH * 5)
    assert log.apply_retention(TS) == 3  # 12 batches: 7 too many, whole segments of 2
    assert log.size_bytes == BATCH * 6 >= BATCH * 5
    assert log.log_start_offset == 6
    log.update_config(config(retention_bytes=0, segment_bytes=BATCH * 2))
    assert log.apply_retention(TS) == 2
    assert log.segment_count == 1  # the active segment stays, whatever the limit


def test_retention_stops_at_the_high_watermark(tmp_path: Path, clock: ManualClock) -> None:
    log = segmented(tmp_path, clock, retention_ms=1)
    log.high_watermark = 5
    assert log.apply_retention(TS + 10**9) == 2  # segment [4, 5] holds offset 5: not committed
    assert log.log_start_offset == 4


def test_delete_records(tmp_path: Path, clock: ManualClock) -> None:
    log = segmented(tmp_path, clock)
    assert log.delete_records(5) == 5
    assert log.log_start_offset == 5
    assert [s.base_offset for s in log.segments] == [4, 6, 8, 10]
    assert headers(read_bytes(log, 5))[0].base_offset == 5
    with pytest.raises(RiverlogError):
        log.read(4, 100)
    assert log.delete_records(3) == 5  # never moves back
    assert log.apply_retention(TS) == 0


@pytest.mark.parametrize("offset", [-1, 13])
def test_delete_records_beyond_the_high_watermark_fails(
    tmp_path: Path, clock: ManualClock, offset: int
) -> None:
    log = segmented(tmp_path, clock)
    with pytest.raises(RiverlogError) as caught:
        log.delete_records(offset)
    assert caught.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.high_watermark = 8
    with pytest.raises(RiverlogError, match="high watermark is 8"):
        log.delete_records(9)
    assert log.log_start_offset == 0
    assert log.segment_count == 6


def test_delete_records_up_to_the_log_end(tmp_path: Path, clock: ManualClock) -> None:
    log = segmented(tmp_path, clock)
    assert log.delete_records(12) == 12
    assert log.segment_count == 1
    assert log.active_segment.base_offset == 12
    assert log.size_bytes == 0
    with log.read(12, 100) as fetched:
        assert fetched.size == 0
    fill(log, 1)
    assert offsets_in(read_bytes(log, 12)) == [12]


def test_truncate_to(tmp_path: Path, clock: ManualClock) -> None:
    log = segmented(tmp_path, clock)
    log.flush()
    assert log.truncate_to(20) is False
    assert log.truncate_to(7) is True
    assert log.log_end_offset == 7
    assert log.high_watermark == 7
    assert log.recovery_point == 7
    assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
    assert log.active_segment.offset_index.file_size == log.config.segment_index_bytes
    assert offsets_in(read_bytes(log, 0)) == list(range(7))
    fill(log, 2)
    assert offsets_in(read_bytes(log, 5)) == [5, 6, 7, 8]
    assert log.truncate_to(6) is True  # exactly a segment's base offset
    assert [s.base_offset for s in log.segments] == [0, 2, 4]
    assert log.log_end_offset == 6


def test_truncate_inside_a_batch_drops_the_whole_batch(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 4, count=3)
    assert log.truncate_to(7) is True  # batch [6, 8]
    assert log.log_end_offset == 6


def test_truncate_fully_and_start_at(tmp_path: Path, clock: ManualClock) -> None:
    log = segmented(tmp_path, clock)
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (100, 100, 100)
    assert log.segment_count == 1
    assert sorted(p.name for p in log.dir.iterdir()) == [
        "00000000000000000100.index",
        "00000000000000000100.log",
        "00000000000000000100.timeindex",
        "leader-epoch-checkpoint",  # emptied: no epoch holds an offset any more
    ]
    assert log.leader_epoch_cache.entries == ()
    fill(log, 1)
    assert offsets_in(read_bytes(log, 100)) == [100]
    assert log.truncate_to(0) is True  # below the first segment: start afresh there
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)


def test_truncate_to_the_first_base_offset_empties_the_log(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = segmented(tmp_path, clock)
    assert log.truncate_to(0) is True
    assert (log.log_start_offset, log.log_end_offset, log.segment_count) == (0, 0, 1)
    assert log.active_segment.log.path.exists()
    fill(log, 2)
    assert offsets_in(read_bytes(log, 0)) == [0, 1]
    log.close()
    reopened = open_log(tmp_path, clock, log.config)
    assert offsets_in(read_bytes(reopened, 0)) == [0, 1]
