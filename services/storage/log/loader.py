"""Loading a partition directory at startup, and recovery after an unclean stop (Kafka's
LogLoader).

What it does, in order:
1. Removes leftovers of interrupted file operations (`*.cleaned`, `*.deleted`, index files
   whose .log is gone) and finishes an interrupted swap of cleaned segments (`*.swap`, see
   `segment_swap.py`).
2. Opens every segment. A missing or corrupt index (`sanity_check`) is rebuilt from the log by
   `LogSegment.recover`, never trusted.
3. Unless the stop was clean, recovers every segment from the one holding the recovery point
   onward: each batch is validated (magic, length, CRC, offsets increasing), and the first
   invalid one (bad CRC, torn tail, bad magic, impossible length) is cut off with everything
   after it: the rest of its file is truncated and later segments are deleted. Nothing before
   the cut is lost. The same cut applies if rebuilding an index finds an invalid batch.
4. Makes the last segment active, and sets the log start offset (never below the first
   segment) and the recovery point (never above the log end offset).
5. Empties the `.txnindex` of every segment from the first recovered one on: its entries need
   the producers' state, so the producer state rebuilds them when it replays the log (Kafka's
   recoverSegment does both at once; here the producer state lives above the log).
"""

from __future__ import annotations

import bisect
import logging
from dataclasses import dataclass
from pathlib import Path

from riverlog.common.clock import Clock
from riverlog.common.types import TopicPartition

from .config import LogConfig
from .index import CorruptIndexError
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    segment_path,
)
from .segment_swap import complete_interrupted_swaps

logger = logging.getLogger(__name__)

_OFFSET_DIGITS = 20


@dataclass(slots=True)
class LoadedLog:
    """The outcome of loading: segments in base-offset order (the last one active)."""

    segments: list[LogSegment]
    log_start_offset: int
    recovery_point: int
    truncated_bytes: int
    # The base of the first recovered segment: the .txnindex of it and of every later segment
    # was emptied, for the producer state to rebuild from the log (None: all are intact).
    txn_index_rebuild_from: int | None = None


def parse_base_offset(path: Path) -> int | None:
    """The base offset a segment file is named by, or None for any other file."""
    stem = path.name.split(".", 1)[0]
    if len(stem) != _OFFSET_DIGITS or not stem.isdigit():
        return None
    return int(stem)


class LogLoader:
    """Loads one partition directory; used once, by `PartitionLog.open`."""

    def __init__(
        self,
        dir: Path,
        tp: TopicPartition,
        config: LogConfig,
        clock: Clock,
        recovery_point: int,
        log_start_offset: int,
        clean_shutdown: bool,
        compacted_below: int = 0,
    ) -> None:
        self.dir = dir
        self.tp = tp
        self.config = config
        self.clock = clock
        self.recovery_point = recovery_point
        self.log_start_offset = log_start_offset
        self.clean_shutdown = clean_shutdown
        # Below the cleaner's first dirty offset the log was compacted, and offsets have gaps
        # there even if the topic is no longer compacted.
        self.compacted_below = compacted_below
        self._first_recovered: int | None = None

    def load(self) -> LoadedLog:
        self.dir.mkdir(parents=True, exist_ok=True)
        complete_interrupted_swaps(self.dir, self.tp)
        bases = self._segment_bases()
        missing = {
            base
            for base in bases
            if not segment_path(self.dir, base, INDEX_SUFFIX).exists()
            or not segment_path(self.dir, base, TIME_INDEX_SUFFIX).exists()
        }
        segments = [self._open(base) for base in bases]
        self._first_recovered = None
        truncated = self._recover(segments, missing)
        if not segments:
            segments.append(self._open(self.log_start_offset))
        active = segments[-1]
        active.make_active(self.config.segment_index_bytes)
        log_end = active.next_offset
        log_start = max(self.log_start_offset, segments[0].base_offset)
        if self.config.remote_storage_enable:
            # Tiered: the records below the first local segment may be in the remote store.
            log_start = min(self.log_start_offset, log_start)
        if log_end < log_start:
            # Everything left is below the checkpointed start: begin afresh there.
            logger.warning(
                "%s: log end offset %d is below the log start offset %d; starting there",
                self.tp,
                log_end,
                log_start,
            )
            for segment in reversed(segments):
                segment.delete()
            segments = [self._open(log_start)]
            segments[0].make_active(self.config.segment_index_bytes)
            log_end = log_start
        recovery_point = log_end if self.clean_shutdown else min(self.recovery_point, log_end)
        rebuild_from = self._first_recovered
        if rebuild_from is not None:
            for segment in segments:
                if segment.base_offset >= rebuild_from:
                    segment.txn_index.reset()
        return LoadedLog(segments, log_start, recovery_point, truncated, rebuild_from)

    def _open(self, base: int) -> LogSegment:
        return LogSegment.open(
            self.dir,
            base,
            self.config.segment_index_bytes,
            self.config.index_interval_bytes,
            self.clock.time_ms(),
        )

    def _segment_bases(self) -> list[int]:
        bases: list[int] = []
        indexes: list[tuple[int, Path]] = []
        for path in self.dir.iterdir():
            base = parse_base_offset(path)
            if base is None or not path.is_file():
                continue
            if path.suffix == LOG_SUFFIX:
                bases.append(base)
            elif path.suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                indexes.append((base, path))
        present = set(bases)
        for base, path in indexes:
            if base not in present:
                logger.info("%s: removing index %s without a log", self.tp, path.name)
                path.unlink()
        return sorted(bases)

    def _recover(self, segments: list[LogSegment], missing: set[int]) -> int:
        """Check or recover each segment in order; cut the log at the first invalid batch.
        Returns the bytes cut (later segments deleted whole are counted too)."""
        bases = [segment.base_offset for segment in segments]
        first_unflushed = len(segments)
        if not self.clean_shutdown:
            first_unflushed = max(bisect.bisect_right(bases, self.recovery_point) - 1, 0)
        expected: int | None = None
        for i, segment in enumerate(segments):
            upper = bases[i + 1] if i + 1 < len(bases) else None
            must_recover = i >= first_unflushed or segment.base_offset in missing
            if not must_recover:
                try:
                    segment.sanity_check(upper)
                except CorruptIndexError as exc:
                    logger.warning("%s: rebuilding indexes: %s", self.tp, exc)
                    must_recover = True
            if not must_recover:
                expected = None
                continue
            if self._first_recovered is None:
                self._first_recovered = segment.base_offset
            size_before = segment.size
            gaps = self.config.compact_enabled or segment.base_offset < self.compacted_below
            cut = segment.recover(expected, contiguous=not gaps)
            short = upper is not None and segment.next_offset < upper and not gaps
            if cut or short:
                if short and not cut:
                    logger.warning(
                        "%s: segment %d ends at offset %d, before the next segment's base %d",
                        self.tp,
                        segment.base_offset,
                        segment.next_offset,
                        upper,
                    )
                return (size_before - segment.size) + self._delete_after(segments, i)
            if upper is not None:
                segment.on_become_inactive()
            expected = segment.next_offset
        return 0

    def _delete_after(self, segments: list[LogSegment], i: int) -> int:
        """Delete every segment after index `i` (last first, so a crash leaves a prefix)."""
        removed = 0
        for segment in reversed(segments[i + 1 :]):
            logger.warning("%s: deleting segment %d after the cut", self.tp, segment.base_offset)
            removed += segment.size
            segment.delete()
        del segments[i + 1 :]
        return removed
