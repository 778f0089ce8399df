"""Which compacted log to clean next, and how far each is clean (Kafka's LogCleanerManager).

Per log, the first dirty offset (everything below it has been cleaned) is kept in memory and in
`cleaner-offset-checkpoint` of the log's directory (Kafka's file name and format), so a restart
does not clean everything again. A log's cleanable section ends at its first uncleanable
offset: the lowest of the active segment's base offset, the high watermark and the base offset
of the first dirty segment holding a record younger than `min.compaction.lag.ms`; only whole
segments below it are cleaned. A log is due when its dirty share of the cleanable bytes
reaches `min.cleanable.dirty.ratio`, when its first dirty batch is older than
`max.compaction.lag.ms`, or when a delete horizon of tombstones kept by an earlier pass has
passed; of the due logs the dirtiest goes first. Runs on the event loop only.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from riverlog.common.types import TopicPartition

from ..checkpoint import CLEANER_OFFSET_CHECKPOINT, CorruptCheckpointError, OffsetCheckpointFile
from ..config import LONG_MAX
from ..partition_log import PartitionLog
from .cleaner import LogToClean, SegmentToClean


@dataclass(frozen=True, slots=True)
class Candidate:
    """A compacted log with its cleanable section measured."""

    log: PartitionLog
    first_dirty: int
    first_uncleanable: int
    segments: tuple[SegmentToClean, ...]
    clean_bytes: int
    dirty_bytes: int
    forced: bool

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


class CleanerManager:
    """Chooses logs and tracks their first dirty offsets; see the module docstring."""

    def __init__(self, log_dirs: Iterable[Path]) -> None:
        self._dirs = list(log_dirs)
        self.first_dirty: dict[TopicPartition, int] = {}
        self.delete_horizons: dict[TopicPartition, int] = {}
        # Logs whose pass failed (a corrupt batch, an I/O error): skipped until restart.
        self.uncleanable: set[TopicPartition] = set()
        for log_dir in self._dirs:
            try:
                self.first_dirty.update(self._file(log_dir).read())
            except CorruptCheckpointError:
                pass  # lost: the logs are cleaned from their start once more

    @staticmethod
    def _file(log_dir: Path) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(log_dir / CLEANER_OFFSET_CHECKPOINT)

    def measure(self, log: PartitionLog, now_ms: int) -> Candidate | None:
        """The cleanable section of a compacted log, or None when there is none."""
        cfg = log.config
        if not cfg.compact_enabled or not log.producer_state_loaded:
            return None  # no open transaction may be cleaned: wait for the producer state
        segments = log.segments
        first_dirty = self.first_dirty.get(log.tp, 0)
        if not log.log_start_offset <= first_dirty <= log.log_end_offset:
            first_dirty = log.log_start_offset
        upper = min(log.active_segment.base_offset, log.high_watermark)
        unstable = log.first_unstable_offset()
        if unstable is not None:
            upper = min(upper, unstable)  # never an open transaction (Kafka)
        chosen: list[SegmentToClean] = []
        clean_bytes = dirty_bytes = 0
        forced = False
        for seg, nxt in itertools.pairwise(segments):
            if nxt.base_offset > upper:
                break
            dirty = nxt.base_offset > first_dirty
            if dirty and cfg.min_compaction_lag_ms > 0:
                if seg.largest_timestamp > now_ms - cfg.min_compaction_lag_ms:
                    break
            if dirty and not dirty_bytes and cfg.max_compaction_lag_ms < LONG_MAX:
                first_ts = next(iter(seg.log.scan(0)), None)
                forced = (
                    first_ts is not None
                    and first_ts.max_timestamp >= 0
                    and now_ms - first_ts.max_timestamp > cfg.max_compaction_lag_ms
                )
            index_bytes = seg.offset_index.size_bytes + seg.time_index.size_bytes
            chosen.append(
                SegmentToClean(
                    seg,
                    seg.base_offset,
                    nxt.base_offset,
                    seg.size,
                    index_bytes,
                    seg.largest_timestamp,
                )
            )
            if dirty:
                dirty_bytes += seg.size
            else:
                clean_bytes += seg.size
        if not chosen:
            return None
        horizon = self.delete_horizons.get(log.tp)
        forced = forced or (horizon is not None and now_ms >= horizon)
        return Candidate(
            log,
            first_dirty,
            chosen[-1].next_base,
            tuple(chosen),
            clean_bytes,
            dirty_bytes,
            forced,
        )

    def grab_filthiest(self, logs: Iterable[PartitionLog], now_ms: int) -> Candidate | None:
        """The due log with the highest dirty ratio (forced ones count as due), or None."""
        due: list[Candidate] = []
        for log in logs:
            if log.tp in self.uncleanable:
                continue
            candidate = self.measure(log, now_ms)
            if candidate is None:
                continue
            ratio_due = (
                candidate.dirty_bytes > 0
                and candidate.dirty_ratio >= log.config.min_cleanable_dirty_ratio
            )
            if ratio_due or candidate.forced:
                due.append(candidate)
        return max(due, key=lambda c: (c.forced, c.dirty_ratio), default=None)

    def to_clean(self, candidate: Candidate, now_ms: int) -> LogToClean:
        log = candidate.log
        return LogToClean(
            log.tp,
            log.dir,
            log.config,
            candidate.segments,
            candidate.first_dirty,
            candidate.first_uncleanable,
            now_ms,
            tuple(
                log.collect_aborted_txns(
                    candidate.segments[0].base_offset, candidate.first_uncleanable
                )
            ),
        )

    def done_cleaning(
        self,
        tp: TopicPartition,
        log_dir: Path | None,
        end_offset: int,
        delete_horizon_ms: int | None,
        live: Iterable[tuple[TopicPartition, Path]],
    ) -> None:
        """Record the new first dirty offset of `tp` and checkpoint its log directory,
        keeping only the partitions in `live` (tp, log dir)."""
        self.first_dirty[tp] = end_offset
        if delete_horizon_ms is None:
            self.delete_horizons.pop(tp, None)
        else:
            self.delete_horizons[tp] = delete_horizon_ms
        if log_dir is None:
            return
        present = {p for p, d in live if d == log_dir}
        self._file(log_dir).write(
            {p: offset for p, offset in self.first_dirty.items() if p in present}
        )
