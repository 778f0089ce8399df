"""One cleaning pass over a compacted log: what stays, what goes, and where the pass stops."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_cleaner_testkit import (
    append,
    clean,
    compact_config,
    keyed_batch,
    latest_by_key,
    open_compacted,
    records,
)
from storage_log_testkit import headers, read_bytes

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import CompressionType
from riverlog.common.records.header import DELETE_HORIZON_MASK
from riverlog.services.storage.log import LogConfig
from riverlog.services.storage.log.cleaner import CleanerManager

DAY = 86_400_000


def fill_updates(log, clock: ManualClock, n: int, keys: int, value_size: int = 8) -> None:  # type: ignore[no-untyped-def]
    for i in range(n):
        append(log, [(b"k%d" % (i % keys), b"v%d-" % i + b"x" * value_size)], clock)
        clock.advance(1)


def test_duplicates_leave_the_latest_record_per_key_at_its_offset(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_compacted(tmp_path, clock)
    fill_updates(log, clock, 120, keys=6)
    before = latest_by_key(records(log))
    size_before = log.size_bytes
    stats = clean(log, clock)
    assert stats is not None and stats.records_kept < stats.records_read
    after = records(log)
    # Everything in the cleaned section is the latest of its key; the active segment (not
    # cleaned) may still hold older duplicates of what follows it.
    cleaned_end = stats.end_offset
    cleaned = [r for r in after if r.offset < cleaned_end]
    assert len({r.key for r in cleaned}) == len(cleaned)
    assert latest_by_key(after) == before
    offsets = [r.offset for r in after]
    assert offsets == sorted(set(offsets))
    assert log.size_bytes < size_before
    assert log.log_end_offset == 120 and log.log_start_offset == 0

    # With the first dirty offset remembered, nothing new means not due again.
    manager = CleanerManager([])
    assert clean(log, clock, manager=manager) is not None
    assert clean(log, clock, manager=manager) is None


def test_active_segment_and_records_above_the_high_watermark_stay(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_compacted(tmp_path, clock)
    fill_updates(log, clock, 120, keys=3)
    active = log.active_segment
    active_bytes = read_bytes(log, active.base_offset)
    hw = log.segments[3].base_offset
    log.high_watermark = hw
    above = [r for r in records(log) if r.offset >= hw]
    stats = clean(log, clock)
    assert stats is not None and stats.end_offset <= hw
    assert log.active_segment is active
    assert read_bytes(log, active.base_offset) == active_bytes
    assert [r for r in records(log) if r.offset >= hw] == above
    below = [r for r in records(log) if r.offset < hw]
    assert len({r.key for r in below}) == len(below)


def test_tombstones_stay_until_delete_retention_after_the_first_clean(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_compacted(tmp_path, clock, compact_config(delete_retention_ms=DAY))
    fill_updates(log, clock, 30, keys=3)
    append(log, [(b"k1", None)], clock)  # the tombstone of k1
    fill_updates(log, clock, 30, keys=1)  # k0 only: rolls segments past the tombstone
    timestamps = {r.offset: r.timestamp for r in records(log)}
    manager = CleanerManager([])
    stats = clean(log, clock, manager=manager)
    assert stats is not None and stats.next_delete_horizon_ms == clock.time_ms() + DAY
    # Stamping the horizon re-encodes the batch against a new base timestamp: the records'
    # own timestamps do not change.
    assert all(r.timestamp == timestamps[r.offset] for r in records(log))
    latest = latest_by_key(records(log))
    assert latest[b"k1"][1] is None  # the tombstone is what a reader of k1 finds
    stamped = [h for h in headers(read_bytes(log, 0)) if h.attributes & DELETE_HORIZON_MASK]
    assert len(stamped) == 1 and stamped[0].base_timestamp == clock.time_ms() + DAY
    clock.advance(DAY - 1)
    assert clean(log, clock, manager=manager) is None  # nothing dirty, horizon not reached
    clock.advance(1)
    stats = clean(log, clock, manager=manager)
    assert stats is not None
    assert b"k1" not in latest_by_key(records(log))
    assert set(latest_by_key(records(log))) == {b"k0", b"k2"}


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path, clock: ManualClock) -> None:
    log = open_compacted(tmp_path, clock, compact_config(min_compaction_lag_ms=60_000))
    fill_updates(log, clock, 60, keys=2)
    assert clean(log, clock) is None  # every segment has a record younger than a minute
    clock.advance(60_000)
    fill_updates(log, clock, 60, keys=2)
    stats = clean(log, clock)
    assert stats is not None
    young = min(r.offset for r in records(log) if r.timestamp > clock.time_ms() - 60_000)
    assert stats.end_offset <= young
    assert all(r.offset < stats.end_offset or r.offset >= 60 for r in records(log))


def test_max_compaction_lag_forces_a_clean_below_the_dirty_ratio(
    tmp_path: Path, clock: ManualClock
) -> None:
    cfg = compact_config(min_cleanable_dirty_ratio="0.99", max_compaction_lag_ms=60_000)
    log = open_compacted(tmp_path, clock, cfg)
    manager = CleanerManager([])
    fill_updates(log, clock, 60, keys=60, value_size=100)  # unique keys: nothing to remove
    assert clean(log, clock, manager=manager) is not None  # never cleaned: ratio 1
    fill_updates(log, clock, 20, keys=2, value_size=100)
    assert clean(log, clock, manager=manager) is None
    clock.advance(60_001)
    assert clean(log, clock, manager=manager) is not None


def test_max_compaction_lag_bounds_how_long_the_active_segment_stays_open() -> None:
    assert compact_config(max_compaction_lag_ms=5_000, segment_ms=60_000).max_segment_ms == 5_000
    assert LogConfig(max_compaction_lag_ms=5_000, segment_ms=60_000).max_segment_ms == 60_000


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.ZSTD])
def test_compressed_batches_are_cleaned_and_stay_compressed(
    tmp_path: Path, clock: ManualClock, codec: CompressionType
) -> None:
    log = open_compacted(tmp_path, clock, compact_config(segment_bytes=4096))
    for i in range(40):
        batch = [(b"k%d" % ((i * 10 + j) % 7), b"value-%d" % (i * 10 + j)) for j in range(10)]
        append(log, batch, clock, compression=codec)
        clock.advance(1)
    before = latest_by_key(records(log))
    stats = clean(log, clock)
    assert stats is not None and stats.records_kept < stats.records_read
    assert latest_by_key(records(log)) == before
    assert {h.compression for h in headers(read_bytes(log, 0))} == {int(codec)}


def test_the_last_batch_of_each_producer_stays_as_an_empty_batch(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_compacted(tmp_path, clock)
    append(log, [(b"a", b"1")], clock, producer_id=7, producer_epoch=2, base_sequence=0)
    append(log, [(b"a", b"2"), (b"b", b"2")], clock, producer_id=7, producer_epoch=2,
           base_sequence=1)  # fmt: skip
    fill_updates(log, clock, 60, keys=2)  # k0/k1 from no producer, then a and b superseded:
    append(log, [(b"a", b"3"), (b"b", b"3")], clock)
    fill_updates(log, clock, 30, keys=2)
    stats = clean(log, clock)
    assert stats is not None
    kept = [h for h in headers(read_bytes(log, 0)) if h.producer_id == 7]
    assert len(kept) == 1  # the first batch went, the last stays
    (last,) = kept
    assert (last.base_offset, last.last_offset, last.records_count) == (1, 2, 0)
    assert (last.producer_epoch, last.base_sequence, last.last_sequence) == (2, 1, 2)
    assert latest_by_key(records(log))[b"a"][1] == b"3"


def test_fetch_from_an_offset_compacted_away_returns_the_next_batch(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_compacted(tmp_path, clock)
    fill_updates(log, clock, 100, keys=4)
    clean(log, clock)
    present = sorted(r.offset for r in records(log))
    gone = [o for o in range(present[-1]) if o not in present]
    assert gone
    for offset in gone[:: max(len(gone) // 10, 1)]:
        got = records(log, offset)
        assert got and got[0].offset == min(o for o in present if o > offset)
    # A follower fetching with a small budget walks the same batches, gap by gap.
    seen, offset = [], 0
    while offset < log.log_end_offset:
        with log.read(offset, 1, max_offset=log.high_watermark) as part:
            data = part.to_bytes()
        (h,) = headers(data)
        seen.append(h.base_offset)
        offset = h.last_offset + 1
    assert seen == sorted(h.base_offset for h in headers(read_bytes(log, 0)))


def test_a_full_offset_map_cleans_part_of_the_dirty_section_per_pass(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_compacted(tmp_path, clock)
    fill_updates(log, clock, 200, keys=40)
    before = latest_by_key(records(log))
    manager = CleanerManager([])
    ends = []
    for _ in range(20):
        stats = clean(log, clock, manager=manager, buffer_bytes=24 * 30)
        if stats is None:
            break
        ends.append(stats.end_offset)
    assert len(ends) > 1 and ends == sorted(ends)
    assert latest_by_key(records(log)) == before


def test_keyless_records_are_dropped_and_refused_on_compacted_topics(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_compacted(tmp_path, clock, compact_config(cleanup_policy="delete"))
    append(log, [(None, b"no key"), (b"k", b"v")], clock)
    log.update_config(compact_config())
    with pytest.raises(RiverlogError) as err:
        log.append_as_leader(keyed_batch([(b"k", b"v"), (None, b"x")], clock.time_ms()), 0)
    assert err.value.code == ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 2  # nothing written
    fill_updates(log, clock, 60, keys=2)
    clean(log, clock)
    assert None not in {r.key for r in records(log)}
    assert latest_by_key(records(log))[b"k"] == (1, b"v")


def test_a_second_pass_groups_the_small_cleaned_segments(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = open_compacted(tmp_path, clock)
    fill_updates(log, clock, 300, keys=3)
    manager = CleanerManager([])
    clean(log, clock, manager=manager)
    count = log.segment_count
    fill_updates(log, clock, 30, keys=3)
    clean(log, clock, manager=manager)
    assert log.segment_count < count
    cleaned = [r for r in records(log) if r.offset < log.active_segment.base_offset]
    assert len(cleaned) == len({r.key for r in cleaned}) == 3


def test_cleaned_segments_have_valid_indexes_and_reload(tmp_path: Path, clock: ManualClock) -> None:
    cfg = compact_config(segment_bytes=8192, index_interval_bytes=64)
    log = open_compacted(tmp_path, clock, cfg)
    fill_updates(log, clock, 400, keys=50)
    clean(log, clock)
    expected = records(log)
    for segment in log.segments[:-1]:
        index = segment.offset_index
        for slot in range(index.entries):
            entry = index.entry(slot)
            (info,) = list(segment.log.scan(entry.position))[:1]
            assert info.last_offset == entry.offset
        segment.sanity_check(None)
        assert segment.time_index.last_entry.timestamp == segment.max_timestamp
    for r in expected[:: max(len(expected) // 20, 1)]:
        assert records(log, r.offset)[0] == r
    log.close()
    reopened = open_compacted(tmp_path, clock, cfg)
    reopened.high_watermark = reopened.log_end_offset
    assert records(reopened) == expected
    assert reopened.offset_for_timestamp(expected[0].timestamp) == (
        expected[0].offset,
        expected[0].timestamp,
    )


def test_compact_and_delete_applies_both(tmp_path: Path, clock: ManualClock) -> None:
    cfg = compact_config(cleanup_policy="compact,delete", retention_ms=60_000)
    log = open_compacted(tmp_path, clock, cfg)
    fill_updates(log, clock, 60, keys=3)  # old: past retention.ms below
    clock.advance(120_000)
    fill_updates(log, clock, 60, keys=3)
    assert clean(log, clock) is not None
    assert len({r.key for r in records(log) if r.offset < 60}) <= 3
    deleted = log.apply_retention(clock.time_ms())
    assert deleted > 0 and log.log_start_offset > 0
    assert all(r.offset >= 60 for r in records(log))
    assert set(latest_by_key(records(log))) == {b"k0", b"k1", b"k2"}
