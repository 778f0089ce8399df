"""The .log file of one segment as raw record batches, and the fetch slices cut from it.

`FileRecords` (Kafka's FileRecords) owns one open file descriptor per segment for the life of
the segment: appends are one `pwrite` per produce request, reads are `pread`s, and scans read
only batch headers (in chunks, so a scan of a few KiB is one system call). Nothing here decodes
records. `FetchSlice` is what a fetch returns: byte ranges of open descriptors, ready for
`os.sendfile`.

The descriptor-lifetime rule: a `FetchSlice` pins the `FileRecords` it covers (a reference
count), so deleting or closing a segment while a slice is outstanding only unlinks the file;
the descriptor stays open, and the bytes stay readable, until the slice is closed (or garbage
collected). Use a slice's descriptors only until you close it. A slice does not survive
truncation of the bytes it covers; truncation only removes data above the high watermark,
which consumer fetches never include.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from riverlog.common.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchHeader,
    InvalidBatchError,
    validate_batch,
)

# baseOffset, batchLength, (epoch), magic, (crc), attributes, lastOffsetDelta,
# (baseTimestamp), maxTimestamp: the header fields a scan needs, from its first 43 bytes.
_SCAN = struct.Struct(">qi4xb4xhi8xq")
SCAN_SIZE = _SCAN.size
SCAN_CHUNK = 4096
RECOVERY_CHUNK = 1 << 20


class BatchInfo(NamedTuple):
    """Where a stored batch is and what its header says, as a header scan sees it."""

    position: int
    base_offset: int
    last_offset: int
    size: int
    max_timestamp: int
    attributes: int

    @property
    def end(self) -> int:
        return self.position + self.size


class FileRecords:
    """An append-only file of record batches. Single-threaded (the storage event loop);
    reference-counted so fetch slices can outlive the segment."""

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self._size = size
        self._refs = 1
        self._closed = False

    @classmethod
    def open(cls, path: Path) -> FileRecords:
        """Open (creating if needed) the file at `path`; its size is the file length."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        return cls(path, fd, os.fstat(fd).st_size)

    @property
    def fd(self) -> int:
        return self._fd

    @property
    def size(self) -> int:
        return self._size

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Write `data` at the end in one call; return the position it starts at. A failed
        write is cut back so the file never keeps half a request."""
        position = self._size
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.pwrite(self._fd, view[written:], position + written)
        except OSError:
            os.ftruncate(self._fd, position)
            raise
        self._size += written
        return position

    def read(self, position: int, size: int) -> bytes:
        end = min(position + size, self._size)
        if position >= end:
            return b""
        return os.pread(self._fd, end - position, position)

    def scan(self, start: int = 0, end: int | None = None) -> Iterator[BatchInfo]:
        """Headers of the batches from `start` (a batch boundary) to `end` (default: the end
        of the file). Stops quietly at anything that does not look like a whole batch: the
        data was validated when it was appended or recovered."""
        stop = self._size if end is None else min(end, self._size)
        position = start
        buf = b""
        buf_start = start
        while position + SCAN_SIZE <= stop:
            rel = position - buf_start
            if rel + SCAN_SIZE > len(buf):
                buf = os.pread(self._fd, SCAN_CHUNK, position)
                buf_start, rel = position, 0
                if len(buf) < SCAN_SIZE:
                    return
            base, length, magic, attributes, delta, max_ts = _SCAN.unpack_from(buf, rel)
            size = length + LOG_OVERHEAD
            if magic != MAGIC or size < HEADER_SIZE or position + size > stop:
                return
            yield BatchInfo(position, base, base + delta, size, max_ts, attributes)
            position += size

    def find_batch(self, target_offset: int, start: int) -> BatchInfo | None:
        """The first batch from `start` whose last offset is >= target (the batch holding it,
        or the next one after a gap), or None when the file ends first."""
        for info in self.scan(start):
            if info.last_offset >= target_offset:
                return info
        return None

    def validated_batches(
        self, start: int = 0, max_batch_size: int | None = None
    ) -> Iterator[tuple[int, BatchHeader]]:
        """Fully validate (magic, length, CRC) each batch from `start`, yielding its position
        and header; raises InvalidBatchError at the first invalid or torn one."""
        position = start
        buf = b""
        buf_start = start
        while position < self._size:
            rel = position - buf_start
            if rel + HEADER_SIZE > len(buf) or _whole_size(buf, rel) > len(buf) - rel:
                want = max(RECOVERY_CHUNK, _whole_size_at(self._fd, position))
                buf = os.pread(self._fd, min(want, self._size - position), position)
                buf_start, rel = position, 0
            try:
                header = validate_batch(buf, rel, max_batch_size)
            except InvalidBatchError as exc:
                raise InvalidBatchError(f"batch at position {position}: {exc}") from None
            yield position, header
            position += header.size

    def truncate_to(self, size: int) -> None:
        if size < self._size:
            os.ftruncate(self._fd, size)
            self._size = size

    def flush(self) -> None:
        os.fsync(self._fd)

    def rename_to(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    # -- reference counting for fetch slices -----------------------------------------------

    def retain(self) -> None:
        if self._refs <= 0:
            raise ValueError(f"{self.path} is closed")
        self._refs += 1

    def release(self) -> None:
        self._refs -= 1
        if self._refs == 0:
            os.close(self._fd)

    def close(self) -> None:
        """The owner's release: the descriptor closes once no fetch slice holds it."""
        if not self._closed:
            self._closed = True
            self.release()

    @property
    def closed(self) -> bool:
        return self._closed


def _whole_size(buf: bytes, rel: int) -> int:
    if len(buf) - rel < LOG_OVERHEAD:
        return HEADER_SIZE
    return max(HEADER_SIZE, int.from_bytes(buf[rel + 8 : rel + 12], "big", signed=True) + 12)


def _whole_size_at(fd: int, position: int) -> int:
    head = os.pread(fd, LOG_OVERHEAD, position)
    return _whole_size(head, 0)


@dataclass(frozen=True, slots=True)
class FileRange:
    """`size` bytes at `position` of open descriptor `fd` (the file was at `path` when the
    slice was cut; after a deletion only the descriptor is valid)."""

    path: Path
    fd: int
    position: int
    size: int


class FetchSlice:
    """The answer to a read: whole stored batches as byte ranges of open files. Close it (or
    use it as a context manager) once the bytes are sent; until then the ranges stay valid even
    if their segments are deleted. Empty when there is nothing to return."""

    def __init__(self, parts: list[tuple[FileRecords, int, int]] | None = None) -> None:
        self._parts: list[tuple[FileRecords, int, int]] = []
        self._open = True
        for part in parts or ():
            part[0].retain()
            self._parts.append(part)
        self.size = sum(size for _, _, size in self._parts)
        # One past the last offset of the batches (set by the log's read; -1 when unknown or
        # empty): the upper bound of the aborted transactions a read_committed fetch lists.
        self.next_offset = -1

    @property
    def ranges(self) -> tuple[FileRange, ...]:
        return tuple(FileRange(r.path, r.fd, pos, size) for r, pos, size in self._parts)

    def to_bytes(self) -> bytes:
        """The bytes of every range, read with `pread` (for transports without sendfile)."""
        if not self._open:
            raise ValueError("the fetch slice is closed")
        chunks = [os.pread(r.fd, size, pos) for r, pos, size in self._parts]
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def close(self) -> None:
        if self._open:
            self._open = False
            for records, _, _ in self._parts:
                records.release()

    def __enter__(self) -> FetchSlice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        spans = ", ".join(f"{r.path.name}@{pos}+{size}" for r, pos, size in self._parts)
        return f"FetchSlice(size={self.size}, [{spans}])"
