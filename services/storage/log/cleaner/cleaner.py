"""One cleaning pass over one partition log (Kafka's Cleaner.doClean): the part that reads and
writes files, run in a worker thread so the event loop keeps serving.

Input is a `LogToClean` snapshot taken on the event loop: the log's inactive segments below
the first uncleanable offset, each with the size it had then, whose `.log` descriptors the
caller holds open (`FileRecords.retain`) for the duration. Nothing here touches the live
segment list, the indexes of the old segments or the log's offsets; the thread only `pread`s
the old `.log` files and writes new `.cleaned` files. The event loop installs the result
afterwards (`PartitionLog.replace_segments`), or discards it if the log changed meanwhile.

The pass:
1. reads the headers of every batch in the range for each producer's last batch;
2. builds the offset map over the dirty section [first dirty, first uncleanable), batch by
   batch, stopping before a batch that would overfill it: the cleaned range then ends at the
   map's latest offset + 1 (the next pass continues from there);
3. groups the segments up to that end by size (Kafka's groupSegmentsBySize: a group stays
   within `segment.bytes`, `segment.index.bytes` and 32-bit relative offsets), and writes one
   cleaned segment per group with `batch_filter.filter_batch` applied to every batch; offsets
   are kept, so the cleaned log has gaps.

Transactions (`txn_metadata.py`): the map skips the data of aborted transactions, the pass
removes it, and a marker goes once no data of its transaction is left and its delete horizon
has passed; the cleaned segment's `.txnindex` lists the aborted transactions whose markers it
keeps. The first uncleanable offset is never past the first unstable offset, so every
transaction the pass sees has ended.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from riverlog.common.records.control import EndTxnMarker, parse_end_txn_marker
from riverlog.common.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    InvalidBatchError,
    parse_header,
    peek_size,
)

from ..config import LogConfig
from ..file_records import FileRecords
from ..index import U32_MAX
from ..offset_index import OffsetIndex
from ..segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    AppendedBatch,
    LogSegment,
)
from ..segment_swap import CLEANED_SUFFIX, discard_cleaned, temp_path
from ..time_index import TimeIndex
from ..txn_index import AbortedTxn, TransactionIndex, write_txn_index
from .batch_filter import Filtered, filter_batch, keyed_offsets
from .offset_map import OffsetMap
from .txn_metadata import CleanedTxnMetadata

READ_CHUNK = 1 << 20
WRITE_CHUNK = 1 << 20


class CleaningAborted(Exception):
    """The cleaner is stopping; the pass left only `.cleaned` files, which are discarded."""


@dataclass(frozen=True, slots=True)
class SegmentToClean:
    """An inactive segment as it was when the pass was planned."""

    segment: LogSegment
    base_offset: int
    next_base: int  # the next segment's base offset: every offset here is below it
    size: int
    index_bytes: int  # bytes of its offset index + time index entries
    largest_timestamp: int  # what time retention compares with now


@dataclass(frozen=True, slots=True)
class LogToClean:
    """What to clean: `segments` from the log's first up to `first_uncleanable` (exclusive),
    and where the dirty section starts."""

    tp: object
    dir: Path
    config: LogConfig
    segments: tuple[SegmentToClean, ...]
    first_dirty: int
    first_uncleanable: int
    now_ms: int
    # The aborted transactions that meet the segments (from the .txnindex, taken on the
    # event loop), whose data the pass removes.
    aborted: tuple[AbortedTxn, ...] = ()


@dataclass(slots=True)
class CleanedGroup:
    """The old segments one `.cleaned` segment (at `old[0]`'s base offset) replaces."""

    old: list[SegmentToClean]
    size: int = 0


@dataclass(slots=True)
class CleanerStats:
    """What one pass did, for the summary line and the scheduling of tombstone removal."""

    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    map_records: int = 0
    map_utilization: float = 0.0
    elapsed_s: float = 0.0
    end_offset: int = 0
    groups: list[CleanedGroup] = field(default_factory=list)
    next_delete_horizon_ms: int | None = None

    def add(self, out: Filtered) -> None:
        """Count one filtered batch; remember the soonest delete horizon kept."""
        self.records_read += out.records_read
        self.records_kept += out.records_kept
        horizon = out.tombstone_horizon_ms
        if horizon is not None and (
            self.next_delete_horizon_ms is None or horizon < self.next_delete_horizon_ms
        ):
            self.next_delete_horizon_ms = horizon


def iter_batches(records: FileRecords, size: int) -> Iterator[bytes]:
    """Every whole batch in the first `size` bytes of `records`, read in large chunks."""
    fd = records.fd
    position = 0
    buf = b""
    rel = 0
    while position + LOG_OVERHEAD <= size:
        if len(buf) - rel < LOG_OVERHEAD or len(buf) - rel < peek_size(buf, rel):
            want = max(READ_CHUNK, peek_size(os.pread(fd, LOG_OVERHEAD, position), 0))
            buf = os.pread(fd, min(want, size - position), position)
            rel = 0
            if len(buf) < HEADER_SIZE or peek_size(buf, 0) > len(buf):
                return
        batch_size = peek_size(buf, rel)
        yield buf[rel : rel + batch_size]
        rel += batch_size
        position += batch_size


class Cleaner:
    """Runs cleaning passes, one at a time, in whatever thread calls `clean`. `abort` is set by
    the owner to stop a pass early (checked between batches)."""

    def __init__(self, offset_map: OffsetMap, abort: threading.Event) -> None:
        self.offset_map = offset_map
        self.abort = abort

    def _check_abort(self) -> None:
        if self.abort.is_set():
            raise CleaningAborted

    def clean(self, task: LogToClean) -> CleanerStats:
        """Write the cleaned segments of `task` as `.cleaned` files; returns what to install
        (`stats.groups`) and the new first dirty offset (`stats.end_offset`)."""
        started = time.monotonic()
        stats = CleanerStats()
        producers = self._producer_last_offsets(task)
        offset_map = self.offset_map
        offset_map.clear()
        end = self._build_offset_map(task, stats)
        stats.end_offset = end
        stats.map_records = offset_map.size
        stats.map_utilization = offset_map.utilization
        cleanable = [s for s in task.segments if s.base_offset < end]
        stats.groups = group_segments_by_size(cleanable, task.config)
        txns = CleanedTxnMetadata(task.aborted)
        try:
            for group in stats.groups:
                self._clean_group(task, group, producers, txns, stats)
        except BaseException:
            for group in stats.groups:
                discard_cleaned(task.dir, group.old[0].base_offset)
            raise
        stats.elapsed_s = time.monotonic() - started
        return stats

    def _producer_last_offsets(self, task: LogToClean) -> dict[int, int]:
        last: dict[int, int] = {}
        for seg in task.segments:
            fd, position = seg.segment.log.fd, 0
            while position + HEADER_SIZE <= seg.size:
                header = parse_header(os.pread(fd, HEADER_SIZE, position))
                if header.magic != MAGIC or header.size < HEADER_SIZE:
                    raise InvalidBatchError(f"{seg.segment.log.path}: no batch at {position}")
                if header.producer_id >= 0:
                    last[header.producer_id] = header.last_offset
                position += header.size
            self._check_abort()
        return last

    def _build_offset_map(self, task: LogToClean, stats: CleanerStats) -> int:
        """Map the dirty section; returns the end of what was mapped (exclusive)."""
        offset_map = self.offset_map
        end = task.first_dirty
        # An aborted record must not hide an earlier committed one of its key (Kafka skips
        # aborted batches when it builds the map).
        txns = CleanedTxnMetadata(a for a in task.aborted if a.last_offset >= task.first_dirty)
        for seg in task.segments:
            if seg.next_base <= task.first_dirty:
                continue
            for batch in iter_batches(seg.segment.log, seg.size):
                header = parse_header(batch)
                if header.last_offset < task.first_dirty:
                    continue
                if header.next_offset > task.first_uncleanable:
                    return end
                if offset_map.size + header.records_count > offset_map.max_entries and (
                    offset_map.size > 0
                ):
                    return end  # full: the rest waits for the next pass
                if header.is_control:
                    txns.on_marker(header, _marker(batch))
                elif not txns.on_data_batch(header):
                    for key, offset in keyed_offsets(batch, task.first_dirty):
                        offset_map.put(key, offset)
                offset_map.update_latest_offset(header.last_offset)
                end = header.next_offset
                self._check_abort()
            end = max(end, min(seg.next_base, task.first_uncleanable))
        return end

    def _clean_group(
        self,
        task: LogToClean,
        group: CleanedGroup,
        producers: dict[int, int],
        txns: CleanedTxnMetadata,
        stats: CleanerStats,
    ) -> None:
        cfg = task.config
        base = group.old[0].base_offset
        discard_cleaned(task.dir, base)
        cleaned = LogSegment(
            task.dir,
            base,
            FileRecords.open(temp_path(task.dir, base, LOG_SUFFIX, CLEANED_SUFFIX)),
            OffsetIndex(
                temp_path(task.dir, base, INDEX_SUFFIX, CLEANED_SUFFIX),
                base,
                cfg.segment_index_bytes,
            ),
            TimeIndex(
                temp_path(task.dir, base, TIME_INDEX_SUFFIX, CLEANED_SUFFIX),
                base,
                cfg.segment_index_bytes,
            ),
            cfg.index_interval_bytes,
            task.now_ms,
            TransactionIndex(temp_path(task.dir, base, TXN_INDEX_SUFFIX, CLEANED_SUFFIX)),
        )
        writer = _SegmentWriter(cleaned)
        txns.cleaned_index = []
        try:
            for seg in group.old:
                stats.bytes_read += seg.size
                for batch in iter_batches(seg.segment.log, seg.size):
                    header = parse_header(batch)
                    if header.is_control:
                        discard = txns.on_marker(header, _marker(batch))
                    else:
                        discard = txns.on_data_batch(header)
                    out = filter_batch(
                        batch,
                        self.offset_map,
                        producers,
                        task.now_ms,
                        cfg.delete_retention_ms,
                        discard,
                    )
                    stats.add(out)
                    if out.data:
                        writer.add(out.data)
                    self._check_abort()
            group.size = writer.finish()
            stats.bytes_written += group.size
            # The aborted transactions whose markers this group keeps (Kafka's cleaned
            # txnIndex): those whose data was still there to remove.
            write_txn_index(
                temp_path(task.dir, base, TXN_INDEX_SUFFIX, CLEANED_SUFFIX), txns.cleaned_index
            )
        finally:
            cleaned.close()
        # Kafka's cleaned.setLastModified: a segment left with no timestamp (every batch
        # removed) falls back to the file's mtime for time retention, so keep it that of the
        # segments it replaces, not the time of cleaning.
        largest = max(seg.largest_timestamp for seg in group.old)
        if largest >= 0:
            ns = largest * 1_000_000
            os.utime(cleaned.log.path, ns=(ns, ns))


class _SegmentWriter:
    """Buffers the batches of a `.cleaned` segment and appends them about a MiB at a time,
    indexing them as a normal append does; `finish` seals and fsyncs the segment."""

    def __init__(self, segment: LogSegment) -> None:
        self._segment = segment
        self._pending: list[bytes] = []
        self._batches: list[AppendedBatch] = []
        self._size = 0

    def add(self, data: bytes) -> None:
        header = parse_header(data)
        self._batches.append(
            AppendedBatch(self._size, len(data), header.last_offset, header.max_timestamp)
        )
        self._pending.append(data)
        self._size += len(data)
        if self._size >= WRITE_CHUNK:
            self._write()

    def _write(self) -> None:
        if self._pending:
            self._segment.append(b"".join(self._pending), self._batches)
            self._pending, self._batches, self._size = [], [], 0

    def finish(self) -> int:
        self._write()
        self._segment.on_become_inactive()
        self._segment.flush()
        return self._segment.size


def _marker(batch: bytes) -> EndTxnMarker | None:
    try:
        return parse_end_txn_marker(batch)
    except InvalidBatchError:
        return None


def group_segments_by_size(segments: list[SegmentToClean], config: LogConfig) -> list[CleanedGroup]:
    """Consecutive segments merged while the group stays within `segment.bytes`,
    `segment.index.bytes` and offsets that fit 32 bits relative to its base (sizes before
    cleaning, so a group's cleaned segment always fits)."""
    groups: list[CleanedGroup] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        group = [first]
        log_size, index_size = first.size, first.index_bytes
        i += 1
        while i < len(segments):
            nxt = segments[i]
            if (
                log_size + nxt.size > config.segment_bytes
                or index_size + nxt.index_bytes > config.segment_index_bytes
                or nxt.next_base - 1 - first.base_offset > U32_MAX
            ):
                break
            group.append(nxt)
            log_size += nxt.size
            index_size += nxt.index_bytes
            i += 1
        groups.append(CleanedGroup(group))
    return groups
