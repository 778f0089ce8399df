"""The background LogCleaner on an event loop: it cleans in a worker thread, checkpoints how
far each log is clean, logs a summary, and stops promptly."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from log_cleaner_testkit import append, compact_config, latest_by_key, records
from storage_log_testkit import TP

from riverlog.common.clock import ManualClock
from riverlog.services.storage.log import LogManager, OffsetCheckpointFile
from riverlog.services.storage.log.checkpoint import CLEANER_OFFSET_CHECKPOINT
from riverlog.services.storage.log.cleaner import CleanerConfig, CleanerManager, LogCleaner


def manager_with_updates(tmp_path: Path, clock: ManualClock) -> LogManager:
    logs = LogManager([tmp_path / "d1"], clock, compact_config())
    log = logs.get_or_create(TP)
    log.producer_state_loaded = True  # no producer state here: nothing transactional
    for i in range(200):
        append(log, [(b"k%d" % (i % 4), b"v%d" % i)], clock)
        clock.advance(1)
    return logs


async def test_clean_once_cleans_checkpoints_and_logs_a_summary(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    logs = manager_with_updates(tmp_path, clock)
    log = logs.get(TP)
    assert log is not None
    before = latest_by_key(records(log))
    cleaner = LogCleaner(logs, clock, CleanerConfig(backoff_ms=10))
    with caplog.at_level(logging.INFO):
        assert await cleaner.clean_once()
    assert latest_by_key(records(log)) == before
    assert len(records(log)) < 200
    checkpoint = OffsetCheckpointFile(tmp_path / "d1" / CLEANER_OFFSET_CHECKPOINT).read()
    assert checkpoint == {TP: log.active_segment.base_offset}
    assert CleanerManager([tmp_path / "d1"]).first_dirty == checkpoint
    summary = [r.getMessage() for r in caplog.records if "cleaned log orders-0" in r.getMessage()]
    assert len(summary) == 1 and "KB ->" in summary[0] and "records" in summary[0]
    assert not await cleaner.clean_once()  # nothing dirty any more
    logs.close()


async def test_the_service_cleans_in_the_background_and_stops(
    tmp_path: Path, clock: ManualClock
) -> None:
    logs = manager_with_updates(tmp_path, clock)
    cleaner = LogCleaner(logs, clock, CleanerConfig(backoff_ms=10))
    cleaner.start()
    for _ in range(500):
        if cleaner.passes:
            break
        await asyncio.sleep(0.01)
    await asyncio.wait_for(cleaner.stop(), 5)
    assert cleaner.passes >= 1
    logs.close()


async def test_a_disabled_cleaner_does_not_run(tmp_path: Path, clock: ManualClock) -> None:
    logs = manager_with_updates(tmp_path, clock)
    cleaner = LogCleaner(logs, clock, CleanerConfig(enable=False))
    cleaner.start()
    assert not cleaner.running  # no task at all, not merely one that has not run yet
    await cleaner.stop()
    assert cleaner.passes == 0
    enabled = LogCleaner(logs, clock, CleanerConfig(enable=True))
    enabled.start()
    assert enabled.running
    await enabled.stop()
    assert not enabled.running
    logs.close()


async def test_a_log_whose_pass_fails_is_left_alone_until_restart(
    tmp_path: Path, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    logs = manager_with_updates(tmp_path, clock)
    log = logs.get(TP)
    assert log is not None
    first = log.segments[0]
    with open(first.log.path, "r+b") as f:  # a batch length that cannot be: the pass fails
        f.seek(8)
        f.write(b"\x00\x00\x00\x01")
    cleaner = LogCleaner(logs, clock, CleanerConfig())
    with caplog.at_level(logging.ERROR):
        assert not await cleaner.clean_once()
    assert "cleaning failed" in caplog.text
    assert cleaner.manager.uncleanable == {TP}
    assert not await cleaner.clean_once()
    assert not [p for p in log.dir.iterdir() if p.name.endswith(".cleaned")]
    logs.close()
