"""Installing cleaned segments: a crash at any step leaves a log the loader completes or rolls
back, and a log that changed during the pass keeps its segments."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from log_cleaner_testkit import append, clean, latest_by_key, open_compacted, records
from storage_log_testkit import config, crash

from riverlog.common.clock import ManualClock
from riverlog.common.records import Record
from riverlog.services.storage.log import PartitionLog
from riverlog.services.storage.log.cleaner import Cleaner, CleanerManager, CleanerStats, OffsetMap
from riverlog.services.storage.log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX
from riverlog.services.storage.log.segment_swap import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    temp_path,
)


def filled(tmp_path: Path, clock: ManualClock) -> PartitionLog:
    log = open_compacted(tmp_path, clock)
    for i in range(150):
        append(log, [(b"k%d" % (i % 5), b"value-%d" % i)], clock)
        clock.advance(1)
    return log


def write_cleaned(log: PartitionLog, clock: ManualClock) -> CleanerStats:
    """Run a pass up to the `.cleaned` files, installing nothing."""
    manager = CleanerManager([])
    candidate = manager.measure(log, clock.time_ms())
    assert candidate is not None
    return Cleaner(OffsetMap(1 << 20), threading.Event()).clean(
        manager.to_clean(candidate, clock.time_ms())
    )


def temp_files(log: PartitionLog) -> list[str]:
    return sorted(p.name for p in log.dir.iterdir() if p.name.endswith((".cleaned", ".swap")))


def rename(
    log: PartitionLog, stats: CleanerStats, old: str, new: str, suffixes: tuple[str, ...]
) -> None:
    for group in stats.groups:
        base = group.old[0].base_offset
        for suffix in suffixes:
            src = temp_path(log.dir, base, suffix, old)
            if src.exists():
                src.replace(temp_path(log.dir, base, suffix, new))


def delete_old(log: PartitionLog, stats: CleanerStats) -> None:
    for group in stats.groups:
        for seg in group.old:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                (log.dir / f"{seg.base_offset:020d}{suffix}").unlink()


def check_compacted(
    reopened: PartitionLog, before: dict[bytes | None, tuple[int, bytes | None]], end: int
) -> list[Record]:
    reopened.high_watermark = reopened.log_end_offset
    got = records(reopened)
    assert latest_by_key(got) == before
    offsets = [r.offset for r in got]
    assert offsets == sorted(set(offsets))
    assert reopened.log_end_offset == end
    assert not temp_files(reopened)
    return got


def test_leftover_cleaned_files_are_removed_and_the_old_segments_kept(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = filled(tmp_path, clock)
    before, all_before, end = latest_by_key(records(log)), records(log), log.log_end_offset
    write_cleaned(log, clock)
    assert any(name.endswith(".log.cleaned") for name in temp_files(log))
    crash(log)
    reopened = open_compacted(tmp_path, clock)
    assert check_compacted(reopened, before, end) == all_before  # rolled back: nothing lost


Step = Callable[[PartitionLog, CleanerStats], None]


def swap_renamed(log: PartitionLog, stats: CleanerStats) -> None:
    rename(log, stats, CLEANED_SUFFIX, SWAP_SUFFIX, (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX))


def old_deleted(log: PartitionLog, stats: CleanerStats) -> None:
    swap_renamed(log, stats)
    delete_old(log, stats)


def indexes_moved(log: PartitionLog, stats: CleanerStats) -> None:
    old_deleted(log, stats)
    rename(log, stats, SWAP_SUFFIX, "", (INDEX_SUFFIX, TIME_INDEX_SUFFIX))


def only_index_swapped(log: PartitionLog, stats: CleanerStats) -> None:
    rename(log, stats, CLEANED_SUFFIX, SWAP_SUFFIX, (INDEX_SUFFIX,))


@pytest.mark.parametrize("step", [swap_renamed, old_deleted, indexes_moved])
def test_an_interrupted_swap_is_completed_on_load(
    tmp_path: Path, clock: ManualClock, step: Step
) -> None:
    log = filled(tmp_path, clock)
    before, end = latest_by_key(records(log)), log.log_end_offset
    stats = write_cleaned(log, clock)
    step(log, stats)
    crash(log)
    reopened = open_compacted(tmp_path, clock)
    got = check_compacted(reopened, before, end)
    cleaned = [r for r in got if r.offset < stats.end_offset]
    assert len(cleaned) == len({r.key for r in cleaned})  # the swap took effect
    assert reopened.segment_count == len(stats.groups) + 1


def test_an_index_swap_without_its_log_swap_is_rolled_back(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = filled(tmp_path, clock)
    all_before, end = records(log), log.log_end_offset
    stats = write_cleaned(log, clock)
    only_index_swapped(log, stats)
    crash(log)
    reopened = open_compacted(tmp_path, clock)
    assert check_compacted(reopened, latest_by_key(all_before), end) == all_before


def test_a_log_changed_during_the_pass_keeps_its_segments(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = filled(tmp_path, clock)
    stats = write_cleaned(log, clock)
    first = stats.groups[0].old
    log.delete_records(first[-1].next_base)  # retention removed the first group meanwhile
    after_retention = records(log)
    results = [
        log.replace_segments([s.segment for s in g.old], [s.size for s in g.old])
        for g in stats.groups
    ]
    assert results[0] is False and all(results[1:])
    assert latest_by_key(records(log)) == latest_by_key(after_retention)
    assert not temp_files(log)


def test_a_truncated_segment_is_not_replaced(tmp_path: Path, clock: ManualClock) -> None:
    log = filled(tmp_path, clock)
    stats = write_cleaned(log, clock)
    last = stats.groups[-1].old[-1]
    log.truncate_to(last.base_offset + 1)  # a follower cutting into the cleaned range
    group = stats.groups[-1]
    truncated = records(log)
    assert not log.replace_segments([s.segment for s in group.old], [s.size for s in group.old])
    assert not temp_path(log.dir, group.old[0].base_offset, LOG_SUFFIX, CLEANED_SUFFIX).exists()
    assert records(log) == truncated and log.log_end_offset == last.base_offset + 1


def test_a_fetch_slice_cut_before_the_swap_still_reads_the_old_bytes(
    tmp_path: Path, clock: ManualClock
) -> None:
    log = filled(tmp_path, clock)
    with log.read(0, 1 << 20, max_offset=log.high_watermark) as before:
        old_bytes = before.to_bytes()
        assert clean(log, clock) is not None
        assert before.to_bytes() == old_bytes
    assert len(records(log)) < 150


def test_swap_files_not_named_by_an_offset_are_removed(tmp_path: Path, clock: ManualClock) -> None:
    log = filled(tmp_path, clock)
    all_before, end = records(log), log.log_end_offset
    junk = [log.dir / "junk.log.swap", log.dir / "12.index.swap"]
    for path in junk:
        path.write_bytes(b"junk")
    log.close()
    reopened = open_compacted(tmp_path, clock)
    assert check_compacted(reopened, latest_by_key(all_before), end) == all_before
    assert not any(path.exists() for path in junk)


def test_a_compacted_log_no_longer_compacted_keeps_its_gaps_through_recovery(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A topic compacted, then switched to cleanup.policy=delete, then killed: recovery from
    offset 0 meets segments that end before the next one begins (the cleaner's gaps). Below
    the cleaner's first dirty offset that is not a torn segment, so nothing is cut."""
    log = filled(tmp_path, clock)
    stats = clean(log, clock, force=True)
    assert stats is not None and stats.end_offset > 0
    log.high_watermark = log.log_end_offset
    before, end = latest_by_key(records(log)), log.log_end_offset
    bases = [s.base_offset for s in log.segments]
    assert any(  # the premise: compaction left segments that end short of the next base
        s.next_offset < nxt for s, nxt in zip(log.segments, bases[1:], strict=False)
    )
    crash(log)
    reopened = PartitionLog.open(
        log.dir,
        log.tp,
        config(cleanup_policy="delete", segment_bytes=1024),
        clock,
        recovery_point=0,
        clean_shutdown=False,
        compacted_below=stats.end_offset,
    )
    check_compacted(reopened, before, end)
