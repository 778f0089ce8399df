"""The ordered segments of one partition log (Kafka's LogSegments), and reads across them.

Segments are kept sorted by base offset, with the base offsets in a parallel list so the one
holding an offset is found by binary search (`bisect`) in O(log n). The last segment is the
active one. Removal happens at the ends: old segments from the front (retention,
DeleteRecords), newer ones from the back (truncation), the back first so that a crash
half-way leaves a log that is a prefix of the one before; and in the middle only when the log
cleaner replaces consecutive inactive segments by the cleaned one.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator, Sequence

from riverlog.common.errors import ErrorCode, RiverlogError

from .config import LogConfig
from .file_records import FetchSlice, FileRecords
from .log_validator import AppendInfo
from .segment import LogSegment

logger = logging.getLogger(__name__)


class LogSegments:
    """A non-empty, base-offset-ordered list of segments. Single-threaded, like its owner
    `PartitionLog`."""

    def __init__(self, segments: list[LogSegment]) -> None:
        if not segments:
            raise ValueError("a log has at least one segment")
        self._segments = segments
        self._bases = [s.base_offset for s in segments]

    def __len__(self) -> int:
        return len(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self._segments)

    def __getitem__(self, index: int) -> LogSegment:
        return self._segments[index]

    def as_tuple(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def first_base_offset(self) -> int:
        return self._bases[0]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def floor_index(self, offset: int) -> int:
        """The index of the segment that may hold `offset` (the last whose base offset is
        <= offset), or 0 when the offset is below every segment."""
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def segment_for(self, offset: int) -> LogSegment:
        """The segment that holds (or would hold) `offset`."""
        return self._segments[self.floor_index(offset)]

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment holding `offset` and every later one."""
        return self._segments[self.floor_index(offset) :]

    def between(self, start_offset: int, end_offset: int) -> list[LogSegment]:
        """The segments holding offsets in [start_offset, end_offset)."""
        return self._segments[
            self.floor_index(start_offset) : bisect.bisect_left(self._bases, end_offset)
        ]

    def should_roll(self, info: AppendInfo, now_ms: int, config: LogConfig) -> bool:
        """Whether the append `info` must go to a new segment (`LogSegment.should_roll`)."""
        return self.active.should_roll(
            info.valid_bytes,
            info.max_timestamp,
            info.last_offset,
            now_ms,
            config.segment_bytes,
            config.max_segment_ms,
        )

    def flush_range(self, start_offset: int, end_offset: int) -> None:
        """fsync the segments holding offsets in [start_offset, end_offset)."""
        if end_offset > start_offset:
            for segment in self.between(start_offset, end_offset):
                segment.flush()

    def add(self, segment: LogSegment) -> None:
        """Append a new active segment; its base offset must be above every other."""
        if segment.base_offset <= self._bases[-1]:
            raise ValueError(f"segment {segment.base_offset} is not after {self._bases[-1]}")
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    def remove_prefix(self, count: int) -> list[LogSegment]:
        """Take the `count` oldest segments out (never the active one) and return them."""
        count = min(count, len(self._segments) - 1)
        if count <= 0:
            return []
        removed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        return removed

    def delete_segments(self, doomed: list[LogSegment], what: object) -> None:
        """Delete the files of segments already taken out (`remove_prefix`)."""
        for segment in doomed:
            logger.info("%s: deleting segment %d", what, segment.base_offset)
            segment.delete()

    def can_replace(self, old: Sequence[LogSegment], sizes: Sequence[int]) -> bool:
        """Whether `old` are still consecutive inactive segments here, of the given sizes."""
        if not old or len(old) != len(sizes):
            return False
        first = bisect.bisect_left(self._bases, old[0].base_offset)
        if first + len(old) >= len(self._segments):  # the active one would be included
            return False
        current = self._segments[first : first + len(old)]
        return all(a is b and a.size == n for a, b, n in zip(current, old, sizes, strict=True))

    def replace(self, old: Sequence[LogSegment], new: LogSegment) -> None:
        """Put `new` (with `old[0]`'s base offset) in place of `old` (see `can_replace`)."""
        first = bisect.bisect_left(self._bases, old[0].base_offset)
        self._segments[first : first + len(old)] = [new]
        self._bases[first : first + len(old)] = [new.base_offset]

    def truncate_to(self, offset: int, index_bytes: int) -> None:
        """Delete every segment whose base offset is >= `offset` (newest first; the first
        segment stays), cut the new last one at `offset` and make it active."""
        cut = max(bisect.bisect_left(self._bases, offset), 1)
        for segment in reversed(self._segments[cut:]):
            segment.delete()
        del self._segments[cut:]
        del self._bases[cut:]
        self.active.truncate_to(offset)
        self.active.make_active(index_bytes)

    def delete_all(self) -> None:
        """Delete every segment's files, newest first; `replace_all` must follow."""
        for segment in reversed(self._segments):
            segment.delete()

    def replace_all(self, segment: LogSegment) -> None:
        self._segments = [segment]
        self._bases = [segment.base_offset]

    def find_offset_by_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """The first (offset, timestamp) at or after `starting_offset` with a timestamp >=
        `timestamp`, from the first segment whose largest timestamp reaches it."""
        for segment in self._segments:
            if segment.size == 0 or segment.largest_timestamp < timestamp:
                continue
            found = segment.find_offset_by_timestamp(timestamp, starting_offset)
            if found is not None:
                return found
        return None

    def read_checked(
        self,
        what: object,
        log_start: int,
        fetch_offset: int,
        max_bytes: int,
        max_offset: int | None,
        min_one_batch: bool,
    ) -> FetchSlice:
        """`read` after the checks of `PartitionLog.read`: OFFSET_OUT_OF_RANGE unless
        log_start <= fetch_offset <= log end, INVALID_FETCH_SIZE for a negative budget."""
        log_end = self.active.next_offset
        if not log_start <= fetch_offset <= log_end:
            raise RiverlogError(
                f"{what}: offset {fetch_offset} is outside [{log_start}, {log_end}]",
                ErrorCode.OFFSET_OUT_OF_RANGE,
            )
        if max_bytes < 0:
            raise RiverlogError(f"max_bytes {max_bytes} < 0", ErrorCode.INVALID_FETCH_SIZE)
        if fetch_offset == log_end or (max_offset is not None and fetch_offset >= max_offset):
            return FetchSlice()
        return self.read(fetch_offset, max_bytes, max_offset, min_one_batch)

    def read(
        self, fetch_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> FetchSlice:
        """Whole batches from the one holding `fetch_offset`, across segments while the byte
        budget lasts, stopping before the batch holding `max_offset` (see
        `LogSegment.read_range`)."""
        parts: list[tuple[FileRecords, int, int]] = []
        remaining = max_bytes
        index = self.floor_index(fetch_offset)
        offset = fetch_offset
        last: tuple[LogSegment, int, int] | None = None
        while index < len(self._segments):
            segment = self._segments[index]
            found = segment.read_range(offset, remaining, max_offset, min_one_batch and not parts)
            if found is not None:
                position, size = found
                if size:
                    parts.append((segment.log, position, size))
                    last = (segment, position, size)
                    remaining -= size
                if position + size < segment.size or remaining <= 0:
                    break
            index += 1
            if index < len(self._segments):
                offset = self._bases[index]
                if max_offset is not None and offset >= max_offset:
                    break
        result = FetchSlice(parts)
        if last is not None:
            result.next_offset = _next_offset_after(*last)
        return result


def _next_offset_after(segment: LogSegment, position: int, size: int) -> int:
    """One past the last offset of the batches in [position, position + size) of `segment`:
    headers are scanned from the index entry at or below the end, so at most an index
    interval of them."""
    end = position + size
    start = max(segment.offset_index.lookup_by_position(end - 1).position, position)
    next_offset = -1
    for info in segment.log.scan(start, end):
        next_offset = info.last_offset + 1
    return next_offset
