"""LeaderEpochFileCache: Kafka's assign / endOffsetFor / truncation rules and the checkpoint file,
and the log keeping it in step with appends, truncation and deletion."""

from __future__ import annotations

from pathlib import Path

from riverlog.common.clock import ManualClock
from riverlog.common.records import BatchBuilder
from riverlog.common.records.header import set_base_offset, set_partition_leader_epoch
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEntry,
    LeaderEpochFileCache,
    LogConfig,
    PartitionLog,
)
from riverlog.services.storage.log.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT

TP = TopicPartition("t", 0)


def _batch(count: int = 1) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(1_700_000_000_000 + i, None, b"v%d" % i)
    return builder.build()


def _follower_batch(base_offset: int, epoch: int, count: int = 1) -> bytes:
    data = bytearray(_batch(count))
    set_base_offset(memoryview(data), 0, base_offset)
    set_partition_leader_epoch(memoryview(data), 0, epoch)
    return bytes(data)


def test_assign_appends_and_ignores_repeats(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    assert cache.latest_epoch == UNDEFINED_EPOCH
    assert cache.assign(0, 0) is True
    assert cache.assign(0, 5) is False  # same epoch, later offset: not a new start
    assert cache.assign(2, 10) is True
    assert cache.assign(1, 20) is False  # older than the latest: refused
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(2, 10))


def test_assign_removes_conflicting_entries(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    cache.assign(0, 0)
    cache.assign(1, 10)
    cache.assign(2, 20)
    # A newer epoch starting before epoch 2 did: epoch 2's range no longer exists here.
    cache.assign(3, 15)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(1, 10), EpochEntry(3, 15))


def test_end_offset_for_follows_kafka(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    assert cache.end_offset_for(0, 100) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    cache.assign(1, 5)
    cache.assign(3, 20)
    cache.assign(6, 40)
    assert cache.end_offset_for(6, 77) == (6, 77)  # the latest: the log end offset
    assert cache.end_offset_for(3, 77) == (3, 40)
    assert cache.end_offset_for(4, 77) == (3, 40)  # unknown epoch: the largest below it
    assert cache.end_offset_for(0, 77) == (0, 5)  # older than all: the first start
    assert cache.end_offset_for(7, 77) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 77) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_truncation_from_both_ends(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    for epoch, start in ((0, 0), (1, 10), (2, 20), (3, 30)):
        cache.assign(epoch, start)
    cache.truncate_from_end(20)
    assert cache.entries == (EpochEntry(0, 0), EpochEntry(1, 10))
    cache.truncate_from_start(15)
    assert cache.entries == (EpochEntry(1, 15),)
    cache.truncate_from_start(5)  # below the first start: nothing to do
    assert cache.entries == (EpochEntry(1, 15),)


def test_checkpoint_file_round_trip_in_kafka_format(tmp_path: Path) -> None:
    cache = LeaderEpochFileCache.in_dir(tmp_path)
    cache.assign(0, 0)
    cache.assign(4, 1200)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n4 1200\n"
    assert LeaderEpochFileCache.in_dir(tmp_path).entries == (EpochEntry(0, 0), EpochEntry(4, 1200))


def test_corrupt_or_unordered_file_is_never_trusted(tmp_path: Path) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text("0\n3\n0 0\nbad line\n2 9\n")
    assert LeaderEpochFileCache.in_dir(tmp_path).entries == ()
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_text("0\n3\n0 0\n5 50\n3 60\n")
    assert LeaderEpochFileCache.in_dir(tmp_path).entries == (EpochEntry(0, 0), EpochEntry(5, 50))


def test_log_records_epochs_of_leader_and_follower_appends(tmp_path: Path) -> None:
    clock = ManualClock()
    log = PartitionLog.open(tmp_path / "t-0", TP, LogConfig(), clock)
    log.append_as_leader(_batch(3), leader_epoch=0)
    log.append_as_leader(_batch(2), leader_epoch=2)
    log.append_as_follower(_follower_batch(5, 2, 2) + _follower_batch(7, 5, 1))
    assert log.leader_epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(2, 3), EpochEntry(5, 7))
    log.truncate_to(5)
    assert log.leader_epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(2, 3))
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", TP, LogConfig(), clock, clean_shutdown=True)
    assert reopened.leader_epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(2, 3))
    reopened.close()


def test_log_opened_after_a_torn_tail_drops_epochs_past_its_end(tmp_path: Path) -> None:
    clock = ManualClock()
    log = PartitionLog.open(tmp_path / "t-0", TP, LogConfig(), clock)
    log.append_as_leader(_batch(3), leader_epoch=1)
    log.close()
    # The checkpoint claims an epoch the log never got (a crash between the two writes).
    cache = LeaderEpochFileCache.in_dir(tmp_path / "t-0")
    cache.assign(4, 3)
    reopened = PartitionLog.open(tmp_path / "t-0", TP, LogConfig(), clock, clean_shutdown=True)
    assert reopened.leader_epoch_cache.entries == (EpochEntry(1, 0),)
    reopened.close()
