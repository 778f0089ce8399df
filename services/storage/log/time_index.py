"""The time index of a segment: from a timestamp to the first offset that may reach it.

Byte layout of `<base offset, 20 digits>.timeindex` (Kafka's TimeIndex), 12 bytes per entry:

    offset  size  field
    0       8     timestamp       int64   big-endian; largest batch maxTimestamp so far
    8       4     relativeOffset  uint32  big-endian; last offset of the batch that holds it
                                          - segment base offset

Entries are added at the same points as offset-index entries, but only when the largest
timestamp seen in the segment has grown, so timestamps strictly increase and offsets never
decrease. When the segment rolls or closes one last entry records the segment's largest
timestamp, which is how a sealed segment knows it without scanning (time retention reads it).
One slot is always kept free for that last entry.
"""

from __future__ import annotations

import operator
import struct
from itertools import repeat
from pathlib import Path
from typing import ClassVar, NamedTuple

from .index import AbstractIndex, CorruptIndexError

NO_TIMESTAMP = -1


class TimestampOffset(NamedTuple):
    """A timestamp and the (absolute) offset of the batch it was first seen in."""

    timestamp: int
    offset: int


class TimeIndex(AbstractIndex):
    """The .timeindex file of one segment; see the module docstring for the format."""

    ENTRY: ClassVar[struct.Struct] = struct.Struct(">qI")
    ENTRY_SIZE: ClassVar[int] = 12
    OFFSET_COLUMN: ClassVar[int] = 1

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)

    @property
    def is_full(self) -> bool:
        """Full one slot early, so the entry written on roll always fits."""
        return self._entries >= self._max_entries - 1

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (NO_TIMESTAMP, base offset) when there is none."""
        if self._entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        timestamp, relative = self._raw(self._entries - 1)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def entry(self, slot: int) -> TimestampOffset:
        if not 0 <= slot < self._entries:
            raise IndexError(f"slot {slot} outside 0..{self._entries - 1} of {self.path}")
        timestamp, relative = self._raw(slot)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add (timestamp, offset) if the timestamp is larger than the last entry's.

        `skip_full_check` is for the entry written when the segment rolls, which uses the
        slot `is_full` keeps free."""
        last = self.last_entry
        if self._entries and offset < last.offset:
            raise ValueError(f"offset {offset} is before the last entry {last} of {self.path}")
        if timestamp <= last.timestamp:
            return
        if not skip_full_check and self.is_full:
            raise ValueError(f"{self.path} is full ({self._entries} entries)")
        if self._entries >= self._max_entries:  # a sealed file: grow it by the one entry
            self.resize(self.size_bytes + self.ENTRY_SIZE)
        self._write(timestamp, self.relative(offset))

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The last entry whose timestamp is <= target, or (NO_TIMESTAMP, base offset)."""
        slot = self._largest_lower_bound(target_timestamp, 0)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        timestamp, relative = self._raw(slot)
        return TimestampOffset(timestamp, self.base_offset + relative)

    def sanity_check(self, upper_bound_offset: int | None, log_size: int) -> None:
        self._check_common(upper_bound_offset, self.last_entry.offset)
        if not self._entries:
            return
        if self.last_entry.timestamp < 0:
            raise CorruptIndexError(f"{self.path}: negative timestamp {self.last_entry.timestamp}")
        words = self._words()  # timestamp = high word << 32 | low word, all >= 0 if sorted
        timestamps = list(
            map(operator.or_, map(operator.lshift, words[0::3], repeat(32)), words[1::3])
        )
        self._check_sorted((timestamps, words[2::3]), (True, False))

    def __repr__(self) -> str:
        return f"TimeIndex({self.path.name}, entries={self._entries}/{self._max_entries})"
