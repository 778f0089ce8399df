"""The shared base of the offset and time indexes: a preallocated, memory-mapped file of
fixed-size big-endian entries, sorted on both columns, searched by binary search.

File layout (Kafka's AbstractIndex): `entries * ENTRY_SIZE` bytes of entries, then, while the
segment is active, zero bytes up to the preallocated size (`segment.index.bytes` rounded down
to a whole entry). The number of valid entries lives in memory; the file is trimmed to exactly
the valid entries when its segment rolls or closes, so a sealed index file holds only entries.
An index is a cache of its log: any doubt (`sanity_check` fails, the file is missing) and the
segment rebuilds it by scanning the log.
"""

from __future__ import annotations

import array
import mmap
import operator
import os
import struct
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar

U32_MAX = 0xFFFFFFFF


class CorruptIndexError(Exception):
    """The index file fails its sanity check; rebuild it from the log."""


class AbstractIndex(ABC):
    """A memory-mapped index of one segment. Not thread-safe: the owning segment calls it
    from the storage event-loop thread only. Lifecycle: open (create or load) → appends and
    lookups → `trim_to_valid_size` on roll → `close` or `delete`."""

    ENTRY: ClassVar[struct.Struct]
    ENTRY_SIZE: ClassVar[int]
    # Which column (0 = first field, 1 = second) holds the offset, for truncate_to.
    OFFSET_COLUMN: ClassVar[int]

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self._mm: mmap.mmap | None = None
        self._entries = 0
        self._max_entries = 0
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            length = os.fstat(fd).st_size
            if length == 0:
                length = self._round(max_index_size)
                os.ftruncate(fd, length)
            else:
                self._entries = length // self.ENTRY_SIZE
            self._map(fd, length)
        finally:
            os.close(fd)

    # -- sizes ------------------------------------------------------------------------------

    def _round(self, size: int) -> int:
        return size - size % self.ENTRY_SIZE

    def _map(self, fd: int, length: int) -> None:
        self._mm = mmap.mmap(fd, length) if length > 0 else None
        self._max_entries = length // self.ENTRY_SIZE

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    @property
    def size_bytes(self) -> int:
        """Bytes of valid entries (the file length once trimmed)."""
        return self._entries * self.ENTRY_SIZE

    @property
    def file_size(self) -> int:
        return self._max_entries * self.ENTRY_SIZE

    def resize(self, new_size: int) -> None:
        """Set the file length to `new_size` rounded down to whole entries (never below the
        valid entries) and re-map it."""
        length = max(self._round(new_size), self.size_bytes)
        if length == self.file_size and (self._mm is not None or length == 0):
            return
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, length)
            self._map(fd, length)
        finally:
            os.close(fd)

    def trim_to_valid_size(self) -> None:
        self.resize(self.size_bytes)

    # -- entries ----------------------------------------------------------------------------

    def _raw(self, slot: int) -> tuple[int, int]:
        assert self._mm is not None
        first, second = self.ENTRY.unpack_from(self._mm, slot * self.ENTRY_SIZE)
        return int(first), int(second)

    def _write(self, first: int, second: int) -> None:
        assert self._mm is not None
        self.ENTRY.pack_into(self._mm, self._entries * self.ENTRY_SIZE, first, second)
        self._entries += 1

    def _largest_lower_bound(self, target: int, column: int) -> int:
        """The last slot whose `column` is <= target, or -1 when every entry is larger."""
        lo, hi = 0, self._entries - 1
        if hi < 0 or self._raw(0)[column] > target:
            return -1
        unpack = self.ENTRY.unpack_from
        mm, size = self._mm, self.ENTRY_SIZE
        assert mm is not None
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if unpack(mm, mid * size)[column] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def truncate_to(self, offset: int) -> None:
        """Drop every entry for an offset >= `offset`."""
        relative = offset - self.base_offset
        slot = self._largest_lower_bound(relative, self.OFFSET_COLUMN) if relative >= 0 else -1
        if slot < 0:
            self._entries = 0
        elif self._raw(slot)[self.OFFSET_COLUMN] == relative:
            self._entries = slot
        else:
            self._entries = slot + 1

    def reset(self) -> None:
        """Forget every entry and make the whole preallocated size writable again."""
        self._entries = 0
        self.resize(self.max_index_size)

    def relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= U32_MAX:
            raise ValueError(f"offset {offset} does not fit segment {self.base_offset}")
        return relative

    # -- checks -----------------------------------------------------------------------------

    def _words(self) -> array.array[int]:
        """The valid entries as big-endian u32 words, decoded in C (for the checks)."""
        words = array.array("I")
        if self._mm is not None:
            words.frombytes(self._mm[: self.size_bytes])
            if sys.byteorder == "little":
                words.byteswap()
        return words

    def _check_sorted(self, columns: Sequence[Sequence[int]], strict: Sequence[bool]) -> None:
        """Every column increases (strictly where asked): C-level loops, ~20 ms for the
        262,144 entries of a full 1 GiB segment's offset index."""
        for number, (column, is_strict) in enumerate(zip(columns, strict, strict=True)):
            cmp = operator.lt if is_strict else operator.le
            if not all(map(cmp, column, column[1:])):
                raise CorruptIndexError(f"{self.path}: column {number} is not sorted")

    @abstractmethod
    def sanity_check(self, upper_bound_offset: int | None, log_size: int) -> None:
        """Raise CorruptIndexError unless the file is well formed: whole entries, both columns
        sorted, every offset in [base_offset, upper_bound_offset) (unchecked when None) and
        every position below `log_size`, the length of the segment's log."""

    def _check_common(self, upper_bound_offset: int | None, last_offset: int) -> None:
        length = self.path.stat().st_size
        if length % self.ENTRY_SIZE:
            raise CorruptIndexError(
                f"{self.path}: size {length} is not a multiple of {self.ENTRY_SIZE}"
            )
        if self._entries and upper_bound_offset is not None and last_offset >= upper_bound_offset:
            raise CorruptIndexError(
                f"{self.path}: last offset {last_offset} is beyond the segment "
                f"(next offset {upper_bound_offset})"
            )

    # -- lifecycle --------------------------------------------------------------------------

    def flush(self) -> None:
        if self._mm is not None:
            self._mm.flush()

    def close(self) -> None:
        """Trim to the valid entries and unmap."""
        self.trim_to_valid_size()
        if self._mm is not None:
            self._mm.close()
            self._mm = None

    def delete(self) -> None:
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        self.path.unlink(missing_ok=True)

    def rename_to(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    @abstractmethod
    def __repr__(self) -> str: ...
