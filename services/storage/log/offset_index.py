"""The sparse offset index of a segment: which byte position of the .log holds which offset.

Byte layout of `<base offset, 20 digits>.index` (Kafka's OffsetIndex), 8 bytes per entry:

    offset  size  field
    0       4     relativeOffset  uint32  big-endian; batch last offset - segment base offset
    4       4     position        uint32  big-endian; byte position of that batch in the .log

An entry is added for a batch once more than `index.interval.bytes` have been appended since
the previous entry (the first batch of a segment needs none: it is at position 0). Both columns
strictly increase. `lookup(o)` gives the last entry whose offset is <= o: the batch holding
offset o starts at that position or after it, within about `index.interval.bytes`.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import ClassVar, NamedTuple

from .index import AbstractIndex, CorruptIndexError


class OffsetPosition(NamedTuple):
    """An absolute offset and the byte position of the batch that ends with it."""

    offset: int
    position: int


class OffsetIndex(AbstractIndex):
    """The .index file of one segment; see the module docstring for the format."""

    ENTRY: ClassVar[struct.Struct] = struct.Struct(">II")
    ENTRY_SIZE: ClassVar[int] = 8
    OFFSET_COLUMN: ClassVar[int] = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        super().__init__(path, base_offset, max_index_size)

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when there is none."""
        if self._entries == 0:
            return self.base_offset
        return self.base_offset + self._raw(self._entries - 1)[0]

    @property
    def last_entry(self) -> OffsetPosition:
        if self._entries == 0:
            return OffsetPosition(self.base_offset, 0)
        relative, position = self._raw(self._entries - 1)
        return OffsetPosition(self.base_offset + relative, position)

    def entry(self, slot: int) -> OffsetPosition:
        if not 0 <= slot < self._entries:
            raise IndexError(f"slot {slot} outside 0..{self._entries - 1} of {self.path}")
        relative, position = self._raw(slot)
        return OffsetPosition(self.base_offset + relative, position)

    def append(self, offset: int, position: int) -> None:
        """Add an entry; offsets and positions must increase and the index must not be full."""
        relative = self.relative(offset)
        if self._entries and relative <= self._raw(self._entries - 1)[0]:
            raise ValueError(
                f"offset {offset} is not beyond the last entry {self.last_offset} of {self.path}"
            )
        if self.is_full:
            raise ValueError(f"{self.path} is full ({self._entries} entries)")
        self._write(relative, position)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The last entry whose offset is <= target, or (base offset, 0) when none is."""
        relative = target_offset - self.base_offset
        slot = self._largest_lower_bound(relative, 0) if relative >= 0 else -1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        found, position = self._raw(slot)
        return OffsetPosition(self.base_offset + found, position)

    def lookup_by_position(self, target_position: int) -> OffsetPosition:
        """The last entry whose position is <= target, or (base offset, 0) when none is;
        used to find the last whole batch that fits a byte budget."""
        slot = self._largest_lower_bound(target_position, 1)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        found, position = self._raw(slot)
        return OffsetPosition(self.base_offset + found, position)

    def sanity_check(self, upper_bound_offset: int | None, log_size: int) -> None:
        self._check_common(upper_bound_offset, self.last_offset)
        if self._entries == 0:
            return
        words = self._words()
        self._check_sorted((words[0::2], words[1::2]), (True, True))
        if self.last_entry.position >= max(log_size, 1):
            raise CorruptIndexError(
                f"{self.path}: last position {self.last_entry.position} is beyond the log "
                f"({log_size} bytes)"
            )

    def __repr__(self) -> str:
        return f"OffsetIndex({self.path.name}, entries={self._entries}/{self._max_entries})"
