"""Every partition log of a storage node, across its log directories (Kafka's LogManager).

A log directory holds one directory per partition (`<topic>-<partition>`), three checkpoint
files (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint` for high watermarks) and, between a clean close and the next
start, the marker `.kafka_cleanshutdown`. At startup the manager reads the checkpoints, loads
every partition directory (skipping recovery when the marker was there, and removing the
marker so a crash from now on is seen as unclean), and removes directories left half-deleted.
New partitions go to the directory holding the fewest partitions.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable, Collection
from pathlib import Path

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from .checkpoint import (
    CLEANER_OFFSET_CHECKPOINT,
    DELETE_DIR_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    OffsetCheckpointFile,
    fsync_dir,
)
from .config import LogConfig
from .partition_log import PartitionLog

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"


class LogManager:
    """Owns the `PartitionLog`s of this node. Lifecycle: construct (loads everything) →
    `get_or_create` / `get` / `delete` and the periodic `run_retention`, `flush_dirty`,
    `checkpoint` → `close`.

    Threading: single-threaded. Every method, and every method of the logs it hands out, is
    called from the storage node's one event-loop thread; nothing here locks.
    """

    def __init__(
        self,
        log_dirs: list[Path],
        clock: Clock,
        default_config: LogConfig,
        topic_config: Callable[[str], LogConfig] | None = None,
    ) -> None:
        """`topic_config(topic)` gives a topic's config when loading its partitions (default:
        `default_config` for all); the caller pushes later changes with `update_config`."""
        if not log_dirs:
            raise ValueError("at least one log directory is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.clock = clock
        self.default_config = default_config
        self._topic_config = topic_config or (lambda _topic: default_config)
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self.offline_dirs: set[Path] = set()  # failed dirs: no new log goes there
        self._closed = False
        for log_dir in self.log_dirs:
            self._load_dir(log_dir)

    # -- loading ----------------------------------------------------------------------------

    def _read_checkpoint(self, log_dir: Path, name: str) -> dict[TopicPartition, int]:
        try:
            return OffsetCheckpointFile(log_dir / name).read()
        except CorruptCheckpointError as exc:
            # Losing a checkpoint is safe: recovery from 0, the start at the first segment,
            # the high watermark at the start until the leader (or the service) restores it.
            logger.error("%s; ignoring it", exc.message)
            return {}

    def _load_dir(self, log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = self._read_checkpoint(log_dir, RECOVERY_POINT_CHECKPOINT)
        start_offsets = self._read_checkpoint(log_dir, LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(log_dir, REPLICATION_OFFSET_CHECKPOINT)
        first_dirty = self._read_checkpoint(log_dir, CLEANER_OFFSET_CHECKPOINT)
        for path in sorted(log_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith(DELETE_DIR_SUFFIX):
                logger.info("removing half-deleted log %s", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                tp = TopicPartition.parse(path.name)
            except ValueError:
                logger.warning("ignoring %s: not a partition directory", path)
                continue
            if tp in self._logs:
                raise RiverlogError(
                    f"{tp} is in two log directories: {self._dir_of[tp]} and {log_dir}",
                    ErrorCode.KAFKA_STORAGE_ERROR,
                )
            log = PartitionLog.open(
                path,
                tp,
                self._topic_config(tp.topic),
                self.clock,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=start_offsets.get(tp, 0),
                clean_shutdown=clean,
                compacted_below=first_dirty.get(tp, 0),
            )
            log.update_high_watermark(high_watermarks.get(tp, log.log_start_offset))
            self._logs[tp] = log
            self._dir_of[tp] = log_dir
        if clean:
            marker.unlink()

    # -- partitions -------------------------------------------------------------------------

    def get(self, tp: TopicPartition) -> PartitionLog | None:
        return self._logs.get(tp)

    def all_logs(self) -> list[PartitionLog]:
        return [self._logs[tp] for tp in sorted(self._logs)]

    def log_dir_of(self, tp: TopicPartition) -> Path | None:
        return self._dir_of.get(tp)

    def mark_offline(self, log_dir: Path) -> None:
        """`log_dir` failed (log/dir_failure.py): place no new log there."""
        self.offline_dirs.add(Path(log_dir))

    def partitions_in(self, log_dirs: Collection[Path]) -> frozenset[TopicPartition]:
        """The partitions whose log is in one of `log_dirs`."""
        return frozenset(tp for tp, d in self._dir_of.items() if d in log_dirs)

    def partition_counts(self) -> dict[Path, int]:
        counts = dict.fromkeys(self.log_dirs, 0)
        for log_dir in self._dir_of.values():
            counts[log_dir] += 1
        return counts

    def next_log_dir(self) -> Path:
        """Kafka's placement: the log directory with the fewest partitions (the first listed
        on a tie)."""
        counts = self.partition_counts()
        online = [d for d in self.log_dirs if d not in self.offline_dirs] or self.log_dirs
        return min(online, key=lambda d: counts[d])

    def get_or_create(self, tp: TopicPartition, config: LogConfig | None = None) -> PartitionLog:
        """The log of `tp`, created empty in `next_log_dir()` when there is none. `config`
        (default: the topic's) is used for a new log only."""
        self._check_open()
        log = self._logs.get(tp)
        if log is not None:
            return log
        log_dir = self.next_log_dir()
        log = PartitionLog.open(
            log_dir / str(tp),
            tp,
            config or self._topic_config(tp.topic),
            self.clock,
            clean_shutdown=True,
        )
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        logger.info("created log %s in %s", tp, log_dir)
        return log

    def delete(self, tp: TopicPartition) -> bool:
        """Remove the log of `tp` and its directory; False when there was none."""
        self._check_open()
        log = self._logs.pop(tp, None)
        if log is None:
            return False
        del self._dir_of[tp]
        log.delete()
        return True

    # -- periodic work ----------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Write the three checkpoint files of every log directory."""
        for log_dir in self.log_dirs:
            logs = [log for tp, log in self._logs.items() if self._dir_of[tp] == log_dir]
            files = {
                RECOVERY_POINT_CHECKPOINT: {log.tp: log.recovery_point for log in logs},
                LOG_START_OFFSET_CHECKPOINT: {log.tp: log.log_start_offset for log in logs},
                REPLICATION_OFFSET_CHECKPOINT: {log.tp: log.high_watermark for log in logs},
            }
            for name, offsets in files.items():
                OffsetCheckpointFile(log_dir / name).write(offsets)

    def run_retention(self, now_ms: int) -> int:
        """Apply retention to every log; returns the segments deleted."""
        self._check_open()
        return sum(log.apply_retention(now_ms) for log in self.all_logs())

    def flush_dirty(self, now_ms: int) -> int:
        """Flush the logs whose flush.ms has passed since their last flush; returns how many."""
        self._check_open()
        flushed = 0
        for log in self.all_logs():
            due = now_ms - log.last_flush_ms >= log.config.flush_ms
            if due and log.log_end_offset > log.recovery_point:
                log.flush()
                flushed += 1
        return flushed

    def flush_all(self) -> None:
        self._check_open()
        for log in self.all_logs():
            log.flush()

    def close(self) -> None:
        """Flush every log, checkpoint, close the logs and write the clean-shutdown markers.
        Idempotent."""
        if self._closed:
            return
        self.flush_all()
        self.checkpoint()
        for log in self.all_logs():
            log.close()
        for log_dir in self.log_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            marker.touch()
            fsync_dir(log_dir)
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise RiverlogError("the log manager is closed", ErrorCode.KAFKA_STORAGE_ERROR)
