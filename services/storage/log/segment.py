"""One segment of a partition log: a .log file of record batches and its two indexes.

Files, named by the segment's base offset (the first offset it may hold) as 20 digits:

    00000000000000368769.log        record batches, byte for byte as appended (RecordBatch v2:
                                    61-byte header + records; see riverlog.common.records.header)
    00000000000000368769.index      offset → position, 8-byte entries (offset_index.py)
    00000000000000368769.timeindex  timestamp → offset, 12-byte entries (time_index.py)
    00000000000000368769.txnindex   aborted transactions whose ABORT marker is here, 34-byte
                                    entries (txn_index.py); only when there is one

The .log is a plain concatenation of batches with no framing of its own; a batch's position is
the sum of the sizes before it. Batches are found by looking up the sparse offset index and
then scanning batch headers forward from that position: records are never decoded here, except
in `find_offset_by_timestamp`, which decodes the one batch that holds the answer.

The last segment of a log is the active one: it takes appends, and its index files are
preallocated to `segment.index.bytes`. Rolling seals it: a last time-index entry is written and
the index files are trimmed to their entries. Not thread-safe: the storage event-loop thread
owns every segment (Kafka's LogSegment says the same).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from riverlog.common.clock import Clock
from riverlog.common.records.header import TIMESTAMP_TYPE_MASK, InvalidBatchError
from riverlog.common.records.reader import iter_record_timestamps

from .file_records import BatchInfo, FileRecords
from .index import U32_MAX
from .offset_index import OffsetIndex
from .time_index import NO_TIMESTAMP, TimeIndex
from .txn_index import AbortedTxn, TransactionIndex, TxnSearchResult

logger = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"


def segment_path(dir: Path, base_offset: int, suffix: str) -> Path:
    return dir / f"{base_offset:020d}{suffix}"


class AppendedBatch(NamedTuple):
    """What a segment needs to index one batch of an append: where it starts in the appended
    bytes, its size, its last offset (after assignment) and its max timestamp."""

    position: int
    size: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    """A .log with its .index, .timeindex and .txnindex; see the module docstring."""

    def __init__(
        self,
        dir: Path,
        base_offset: int,
        log: FileRecords,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        index_interval_bytes: int,
        created_ms: int,
        txn_index: TransactionIndex | None = None,
    ) -> None:
        self.dir = dir
        self.base_offset = base_offset
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index or TransactionIndex(
            segment_path(dir, base_offset, TXN_INDEX_SUFFIX)
        )
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self._bytes_since_last_index_entry = 0
        last = time_index.last_entry
        self._max_timestamp, self._offset_of_max_timestamp = last.timestamp, last.offset
        self._rolling_timestamp: int | None = None
        self._next_offset: int | None = None

    @classmethod
    def open(
        cls,
        dir: Path,
        base_offset: int,
        index_bytes: int,
        index_interval_bytes: int,
        now_ms: int,
    ) -> LogSegment:
        """Open the segment's files, creating the missing ones (an index file created here is
        empty: the caller rebuilds it when the log is not)."""
        log = FileRecords.open(segment_path(dir, base_offset, LOG_SUFFIX))
        offset_index = OffsetIndex(
            segment_path(dir, base_offset, INDEX_SUFFIX), base_offset, index_bytes
        )
        time_index = TimeIndex(
            segment_path(dir, base_offset, TIME_INDEX_SUFFIX), base_offset, index_bytes
        )
        return cls(dir, base_offset, log, offset_index, time_index, index_interval_bytes, now_ms)

    @classmethod
    def create(
        cls, dir: Path, base_offset: int, index_bytes: int, index_interval_bytes: int, clock: Clock
    ) -> LogSegment:
        """A new, empty segment; leftover files at its names (from a deletion or truncation
        that did not finish) are emptied, as they hold nothing the log keeps."""
        segment = cls.open(dir, base_offset, index_bytes, index_interval_bytes, clock.time_ms())
        if (
            segment.size
            or segment.offset_index.entries
            or segment.time_index.entries
            or segment.txn_index.entries
        ):
            segment.log.truncate_to(0)
            segment.offset_index.reset()
            segment.time_index.reset()
            segment.txn_index.reset()
            segment._max_timestamp, segment._offset_of_max_timestamp = NO_TIMESTAMP, base_offset
            segment._next_offset = base_offset
        return segment

    # -- state ------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.log.size

    @property
    def next_offset(self) -> int:
        """One past the last offset stored here (the base offset when empty)."""
        if self._next_offset is None:
            self._restore_tail_state()
            assert self._next_offset is not None
        return self._next_offset

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """The largest batch timestamp, or the file's modification time when no batch has one
        (Kafka's rule); time retention compares it with now."""
        if self._max_timestamp >= 0:
            return self._max_timestamp
        return os.stat(self.log.path).st_mtime_ns // 1_000_000

    def _restore_tail_state(self) -> None:
        """Scan the headers after the last offset-index entry: the exact next offset and the
        largest timestamp (the time index may lag by up to an index interval)."""
        start = self.offset_index.last_entry.position
        next_offset = self.base_offset
        for info in self.log.scan(start):
            next_offset = info.last_offset + 1
            if info.max_timestamp > self._max_timestamp:
                self._max_timestamp, self._offset_of_max_timestamp = (
                    info.max_timestamp,
                    info.last_offset,
                )
        if next_offset == self.base_offset and start > 0:
            next_offset = self.offset_index.last_entry.offset + 1
        self._next_offset = next_offset

    def _rolling_based_timestamp(self) -> int:
        if self._rolling_timestamp is None:
            first = next(iter(self.log.scan(0, None)), None)
            self._rolling_timestamp = first.max_timestamp if first else NO_TIMESTAMP
        return self._rolling_timestamp

    # -- appends ----------------------------------------------------------------------------

    def should_roll(
        self,
        append_size: int,
        max_timestamp: int,
        last_offset: int,
        now_ms: int,
        segment_bytes: int,
        segment_ms: int,
    ) -> bool:
        """Kafka's rule: roll a non-empty segment when the append would pass segment.bytes,
        segment.ms has passed since its first batch, an index is full, or the offsets no
        longer fit 32 bits relative to the base offset."""
        if self.size == 0:
            return False
        rolling = self._rolling_based_timestamp()
        waited = max_timestamp - rolling if rolling >= 0 else now_ms - self.created_ms
        return (
            self.size > segment_bytes - append_size
            or waited > segment_ms
            or self.offset_index.is_full
            or self.time_index.is_full
            or last_offset - self.base_offset > U32_MAX
        )

    def append(
        self, data: bytes | bytearray | memoryview, batches: Sequence[AppendedBatch]
    ) -> None:
        """Write `data` (whole batches, offsets assigned) in one call, then index it."""
        position = self.log.append(data)
        if self.size == len(data) and batches:
            self._rolling_timestamp = batches[0].max_timestamp
        self._index(position, batches)
        if batches:
            self._next_offset = batches[-1].last_offset + 1

    def _index(self, position: int, batches: Sequence[AppendedBatch]) -> None:
        for batch in batches:
            if batch.max_timestamp > self._max_timestamp:
                self._max_timestamp = batch.max_timestamp
                self._offset_of_max_timestamp = batch.last_offset
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                # A full index (only possible within one multi-batch append) just gets sparser.
                if not self.offset_index.is_full:
                    self.offset_index.append(batch.last_offset, position + batch.position)
                if not self.time_index.is_full:
                    self.time_index.maybe_append(self._max_timestamp, self._offset_of_max_timestamp)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += batch.size

    # -- lookups ----------------------------------------------------------------------------

    def translate_offset(self, offset: int, start_position: int = 0) -> BatchInfo | None:
        """The first batch whose last offset is >= `offset`, or None when there is none."""
        position = max(self.offset_index.lookup(offset).position, start_position)
        return self.log.find_batch(offset, position)

    def read_range(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> tuple[int, int] | None:
        """(position, size) of the whole batches from the one holding `fetch_offset`, within
        `max_bytes` (or exactly one batch when it alone is bigger and `min_one_batch`), and
        ending before the batch holding `max_offset`. None when no batch here holds or follows
        `fetch_offset`; size 0 when the first batch is excluded."""
        start = self.translate_offset(fetch_offset)
        if start is None:
            return None
        end = self.size
        if max_offset is not None and max_offset < self.next_offset:
            if start.last_offset >= max_offset:
                return start.position, 0
            bound = self.translate_offset(max_offset, start.position)
            if bound is not None:
                end = bound.position
        limit = start.position + max(max_bytes, 0)
        if limit < end:
            entry = self.offset_index.lookup_by_position(limit)
            boundary = max(entry.position, start.position)
            for info in self.log.scan(boundary, end):
                if info.end > limit:
                    break
                boundary = info.end
            end = boundary
            if end == start.position and min_one_batch:
                end = start.end
        return start.position, end - start.position

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> TxnSearchResult:
        """The aborted transactions indexed here that meet [start, upper bound)."""
        return self.txn_index.search(start_offset, upper_bound_offset)

    def update_txn_index(self, aborted: AbortedTxn) -> None:
        """Index a transaction whose ABORT marker was appended here."""
        self.txn_index.append(aborted)

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """The first (offset, timestamp) here with timestamp >= `timestamp` and offset >=
        `starting_offset`; decodes only the batch that holds it."""
        entry = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(entry.offset, starting_offset)).position
        for info in self.log.scan(position):
            if info.max_timestamp < timestamp or info.last_offset < starting_offset:
                continue
            if info.attributes & TIMESTAMP_TYPE_MASK:  # LogAppendTime: one time for all
                return max(info.base_offset, starting_offset), info.max_timestamp
            batch = self.log.read(info.position, info.size)
            for offset, record_ts in iter_record_timestamps(batch, validate_crc=False):
                if record_ts >= timestamp and offset >= starting_offset:
                    return offset, record_ts
        return None

    # -- recovery and truncation ------------------------------------------------------------

    def sanity_check(self, upper_bound_offset: int | None) -> None:
        """Raise CorruptIndexError when an index file is not to be trusted."""
        self.offset_index.sanity_check(upper_bound_offset, self.size)
        self.time_index.sanity_check(upper_bound_offset, self.size)

    def recover(self, min_base_offset: int | None = None, contiguous: bool = True) -> int:
        """Validate every batch (magic, length, CRC, offsets from the base offset or
        `min_base_offset` on), rebuild both indexes from them, and cut the file after the last
        valid one. Returns the number of bytes cut. The .txnindex is emptied: its entries need
        the producers' state, so the partition's producer state rebuilds them.

        baseOffset is outside the CRC, so offsets are checked against the previous batch:
        each batch must start exactly where the previous one ended when `contiguous` (any log
        that no compaction touched), or after it otherwise."""
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()  # rebuilt by the producer state's replay (Kafka's recover)
        self._max_timestamp, self._offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_timestamp = None
        expected = max(self.base_offset, min_base_offset or 0)
        valid = 0
        reason = ""
        try:
            for position, header in self.log.validated_batches(0):
                if header.base_offset < expected or (contiguous and header.base_offset != expected):
                    reason = f"offset {header.base_offset} at {position}, expected {expected}"
                    break
                if header.last_offset - self.base_offset > U32_MAX:
                    reason = f"offset {header.last_offset} at {position} beyond the segment"
                    break
                batch = AppendedBatch(0, header.size, header.last_offset, header.max_timestamp)
                self._index(position, (batch,))
                valid = position + header.size
                expected = header.next_offset
        except InvalidBatchError as exc:
            reason = str(exc)
        cut = self.size - valid
        if cut:
            logger.warning("%s: cutting %d bytes at %d: %s", self.log.path, cut, valid, reason)
            self.log.truncate_to(valid)
        self._next_offset = expected if valid else self.base_offset
        return cut

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after it; returns bytes removed."""
        info = self.translate_offset(offset)
        if info is None:
            return 0
        removed = self.size - info.position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        self.log.truncate_to(info.position)
        last = self.time_index.last_entry
        self._max_timestamp, self._offset_of_max_timestamp = last.timestamp, last.offset
        self._bytes_since_last_index_entry = 0
        if self.size == 0:
            self._rolling_timestamp = None
        self._restore_tail_state()
        return removed

    # -- lifecycle --------------------------------------------------------------------------

    def on_become_inactive(self) -> None:
        """Seal: record the largest timestamp in the time index and trim both index files."""
        self.time_index.maybe_append(
            self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def make_active(self, index_bytes: int) -> None:
        """Make a sealed segment appendable again (after truncation): grow its indexes."""
        self.offset_index.max_index_size = index_bytes
        self.time_index.max_index_size = index_bytes
        self.offset_index.resize(index_bytes)
        self.time_index.resize(index_bytes)

    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Seal the indexes and release the .log (fetch slices may keep it open)."""
        if self.log.closed:
            return
        self.time_index.maybe_append(
            self._max_timestamp, self._offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.close()
        self.time_index.close()
        self.log.close()

    def delete(self) -> None:
        """Unlink the files; outstanding fetch slices keep reading the .log until closed."""
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        if not self.log.closed:
            self.log.close()
        self.log.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self.size}, dir={self.dir.name})"
