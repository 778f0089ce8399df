"""LogManager: loading log directories, clean-shutdown markers, checkpoints, placement of new
partitions, deletion, retention and flushing across logs."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_log_testkit import config, crash, fill, make_batch, offsets_in, read_bytes

from riverlog.common.clock import ManualClock
from riverlog.common.errors import RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import (
    CLEAN_SHUTDOWN_FILE,
    LogConfig,
    LogManager,
    OffsetCheckpointFile,
)


def tp(topic: str, partition: int = 0) -> TopicPartition:
    return TopicPartition(topic, partition)


@pytest.fixture
def dirs(tmp_path: Path) -> list[Path]:
    return [tmp_path / "d0", tmp_path / "d1", tmp_path / "d2"]


def manager(dirs: list[Path], clock: ManualClock, cfg: LogConfig | None = None) -> LogManager:
    return LogManager(dirs, clock, cfg or LogConfig())


def test_new_partitions_go_to_the_dir_with_fewest(dirs: list[Path], clock: ManualClock) -> None:
    m = manager(dirs, clock)
    placed = [m.log_dir_of(m.get_or_create(tp("t", p)).tp) for p in range(6)]
    assert placed == dirs + dirs
    m.delete(tp("t", 1))  # d1 now has the fewest
    assert m.log_dir_of(m.get_or_create(tp("u")).tp) == dirs[1]
    assert m.partition_counts() == dict.fromkeys(dirs, 2)
    assert (dirs[1] / "u-0").is_dir()
    m.close()


def test_get_or_create_returns_the_existing_log(dirs: list[Path], clock: ManualClock) -> None:
    m = manager(dirs, clock)
    log = m.get_or_create(tp("t"), config(retention_ms=5))
    assert m.get_or_create(tp("t")) is log
    assert m.get(tp("t")) is log
    assert m.get(tp("nope")) is None
    assert log.config.retention_ms == 5
    assert [log.tp for log in m.all_logs()] == [tp("t")]
    m.close()


def test_close_then_reopen_restores_everything(dirs: list[Path], clock: ManualClock) -> None:
    m = manager(dirs, clock, config(segment_bytes=500))
    for p in range(4):
        log = m.get_or_create(tp("orders", p))
        fill(log, 10 + p)
    m.get(tp("orders", 0)).high_watermark = 7  # type: ignore[union-attr]
    m.get(tp("orders", 1)).delete_records(5)  # type: ignore[union-attr]
    contents = {log.tp: read_bytes(log, log.log_start_offset) for log in m.all_logs()}
    m.close()
    for d in dirs:
        assert (d / CLEAN_SHUTDOWN_FILE).exists()
        hw = OffsetCheckpointFile(d / "replication-offset-checkpoint").read()
        assert all(t.topic == "orders" for t in hw)
    assert OffsetCheckpointFile(dirs[0] / "replication-offset-checkpoint").read() == {
        tp("orders", 0): 7,
        tp("orders", 3): 13,
    }
    assert OffsetCheckpointFile(dirs[1] / "log-start-offset-checkpoint").read() == {
        tp("orders", 1): 5
    }

    m2 = manager(dirs, clock, config(segment_bytes=500))
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)  # removed at start
    logs = {log.tp: log for log in m2.all_logs()}
    assert sorted(logs) == [tp("orders", p) for p in range(4)]
    assert logs[tp("orders", 0)].high_watermark == 7
    assert logs[tp("orders", 1)].log_start_offset == 5
    assert logs[tp("orders", 2)].recovery_point == 12
    assert {t: read_bytes(log, log.log_start_offset) for t, log in logs.items()} == contents
    assert m2.log_dir_of(tp("orders", 1)) == dirs[1]
    m2.close()


def test_unclean_start_recovers_and_uses_checkpoints(dirs: list[Path], clock: ManualClock) -> None:
    m = manager(dirs[:1], clock)
    log = m.get_or_create(tp("t"))
    fill(log, 5)
    log.flush()
    m.checkpoint()  # recovery point 5, high watermark 5
    fill(log, 3)
    path = log.active_segment.log.path
    crash(log)
    with open(path, "ab") as f:
        f.write(b"\x00" * 100)  # a torn write at the tail
    m2 = manager(dirs[:1], clock)
    log2 = m2.get(tp("t"))
    assert log2 is not None
    assert log2.log_end_offset == 8
    assert log2.recovery_point == 5
    assert log2.high_watermark == 5
    assert path.stat().st_size == log2.active_segment.size
    m2.close()


def test_corrupt_checkpoint_falls_back_to_full_recovery(
    dirs: list[Path], clock: ManualClock
) -> None:
    m = manager(dirs[:1], clock)
    fill(m.get_or_create(tp("t")), 4)
    m.close()
    (dirs[0] / "recovery-point-offset-checkpoint").write_text("garbage")
    (dirs[0] / CLEAN_SHUTDOWN_FILE).unlink()
    m2 = manager(dirs[:1], clock)
    log = m2.get(tp("t"))
    assert log is not None
    assert (log.log_end_offset, log.recovery_point) == (4, 0)
    m2.close()


def test_half_deleted_and_foreign_dirs(dirs: list[Path], clock: ManualClock) -> None:
    m = manager(dirs[:1], clock)
    fill(m.get_or_create(tp("t")), 2)
    m.close()
    (dirs[0] / "t-1.0123abcd-delete").mkdir()
    (dirs[0] / "t-1.0123abcd-delete" / "00000000000000000000.log").write_bytes(b"x")
    (dirs[0] / "lost+found").mkdir()
    m2 = manager(dirs[:1], clock)
    assert [log.tp for log in m2.all_logs()] == [tp("t")]
    assert not (dirs[0] / "t-1.0123abcd-delete").exists()
    assert (dirs[0] / "lost+found").exists()
    m2.close()


def test_duplicate_partition_across_dirs_is_an_error(dirs: list[Path], clock: ManualClock) -> None:
    (dirs[0] / "t-0").mkdir(parents=True)
    (dirs[1] / "t-0").mkdir(parents=True)
    with pytest.raises(RiverlogError, match="two log directories"):
        manager(dirs, clock)


def test_delete(dirs: list[Path], clock: ManualClock) -> None:
    m = manager(dirs, clock)
    fill(m.get_or_create(tp("t")), 3)
    assert m.delete(tp("t")) is True
    assert m.delete(tp("t")) is False
    assert not (dirs[0] / "t-0").exists()
    m.checkpoint()
    assert OffsetCheckpointFile(dirs[0] / "recovery-point-offset-checkpoint").read() == {}
    m.close()


def test_retention_and_flush_across_logs(dirs: list[Path], clock: ManualClock) -> None:
    cfg = config(segment_bytes=len(make_batch(1)) * 2, retention_ms=1000, flush_ms=500)
    m = manager(dirs, clock, cfg)
    for p in range(3):
        fill(m.get_or_create(tp("t", p)), 6, clock=clock)
    assert m.flush_dirty(clock.time_ms()) == 0  # flush.ms has not passed yet
    clock.advance(600)
    assert m.flush_dirty(clock.time_ms()) == 3
    assert all(log.recovery_point == 6 for log in m.all_logs())
    assert m.run_retention(clock.time_ms() + 2000) == 6  # 2 of 3 segments per log
    assert all(log.log_start_offset == 4 for log in m.all_logs())
    assert offsets_in(read_bytes(m.get(tp("t", 2)), 4)) == [4, 5]  # type: ignore[arg-type]
    m.close()
    with pytest.raises(RiverlogError):
        m.get_or_create(tp("x"))


def test_topic_config_callback_on_load(dirs: list[Path], clock: ManualClock) -> None:
    m = manager(dirs[:1], clock)
    fill(m.get_or_create(tp("a")), 1)
    fill(m.get_or_create(tp("b")), 1)
    m.close()
    special = config(retention_ms=123)
    m2 = LogManager(dirs[:1], clock, LogConfig(), lambda t: special if t == "b" else LogConfig())
    assert m2.get(tp("a")).config.retention_ms == LogConfig().retention_ms  # type: ignore[union-attr]
    assert m2.get(tp("b")).config.retention_ms == 123  # type: ignore[union-attr]
    m2.close()


def test_no_new_partition_goes_to_an_offline_dir(dirs: list[Path], clock: ManualClock) -> None:
    m = manager(dirs, clock)
    for p in range(3):
        m.get_or_create(tp("t", p))
    m.mark_offline(dirs[0])
    assert m.partitions_in({dirs[0]}) == {tp("t", 0)}
    placed = [m.log_dir_of(m.get_or_create(tp("u", p)).tp) for p in range(4)]
    assert dirs[0] not in placed
    assert m.partitions_in({dirs[0]}) == {tp("t", 0)}
    m.close()
