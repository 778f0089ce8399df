"""The aborted-transaction index of a segment (Kafka's TransactionIndex, KIP-98).

`<base offset, 20 digits>.txnindex` lists the transactions aborted by an ABORT marker stored
in the segment, in marker order, 34 bytes per entry (big-endian):

    offset  size  field
    0       2     version           int16  0
    2       8     producer id       int64
    10      8     first offset      int64  the transaction's first data batch in this partition
    18      8     last offset       int64  its ABORT marker
    26      8     last stable offset int64 the first unstable offset once it was aborted

A read_committed fetch asks the segments from the fetch offset onward for the entries that
overlap the data it returns, so a reader can drop their records. An entry is kept in the
marker's segment, so it may name data in earlier segments. The file is created on the first
entry (most segments have none), rebuilt from the log when the segment is recovered,
truncated with the segment and carried by the cleaner into the segment that replaces it. A
torn last entry (a crash mid-write) is dropped when the file is read.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

TXN_INDEX_VERSION: Final = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE: Final = _ENTRY.size  # 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction of one producer in one partition (Kafka's AbortedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            TXN_INDEX_VERSION,
            self.producer_id,
            self.first_offset,
            self.last_offset,
            self.last_stable_offset,
        )

    def overlaps(self, start_offset: int, upper_bound_offset: int) -> bool:
        """Whether its offsets meet [start_offset, upper_bound_offset)."""
        return self.last_offset >= start_offset and self.first_offset < upper_bound_offset


class CorruptTxnIndexError(ValueError):
    """An entry of another version: the file was not written by us."""


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """The whole entries of a .txnindex file's bytes (a torn tail is ignored)."""
    out: list[AbortedTxn] = []
    for pos in range(0, len(data) - ENTRY_SIZE + 1, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != TXN_INDEX_VERSION:
            raise CorruptTxnIndexError(f"unknown txn index entry version {version} at {pos}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


@dataclass(frozen=True, slots=True)
class TxnSearchResult:
    """Entries found in one segment, and whether the search may stop (an entry whose last
    stable offset reaches the upper bound: no later marker can name earlier data)."""

    aborted: list[AbortedTxn]
    complete: bool


def search(
    entries: Iterable[AbortedTxn], start_offset: int, upper_bound_offset: int
) -> TxnSearchResult:
    """Kafka's TransactionIndex.collectAbortedTxns over one segment's entries."""
    found: list[AbortedTxn] = []
    for entry in entries:
        if entry.overlaps(start_offset, upper_bound_offset):
            found.append(entry)
        if entry.last_stable_offset >= upper_bound_offset:
            return TxnSearchResult(found, True)
    return TxnSearchResult(found, False)


class TransactionIndex:
    """The .txnindex of one segment, its entries held in memory (a few per segment). Owned by
    its segment on the event-loop thread; the cleaner's worker only reads `entries` of
    inactive segments, which nothing appends to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: list[AbortedTxn] = []
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        self._entries = decode_entries(data)
        if len(data) != len(self._entries) * ENTRY_SIZE:
            self._write_all()  # drop the torn tail so appends line up

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        return tuple(self._entries)

    def append(self, entry: AbortedTxn) -> bool:
        """Add an entry; False (nothing written) when its marker is not after the last one
        indexed here, i.e. it is already indexed."""
        if self._entries and entry.last_offset <= self._entries[-1].last_offset:
            return False
        with open(self.path, "ab") as f:
            f.write(entry.encode())
        self._entries.append(entry)
        return True

    def search(self, start_offset: int, upper_bound_offset: int) -> TxnSearchResult:
        return search(self._entries, start_offset, upper_bound_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (Kafka's truncateTo)."""
        kept = [e for e in self._entries if e.last_offset < offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._write_all()

    def reset(self) -> None:
        """Forget every entry (the segment is being recovered; the log rebuilds them)."""
        self._entries = []
        self.path.unlink(missing_ok=True)

    def flush(self) -> None:
        if self._entries:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)

    def _write_all(self) -> None:
        if not self._entries:
            self.path.unlink(missing_ok=True)
            return
        self.path.write_bytes(b"".join(e.encode() for e in self._entries))


def write_txn_index(path: Path, entries: Iterable[AbortedTxn]) -> None:
    """Write a whole .txnindex (the cleaner's cleaned segment), fsynced; none when empty."""
    data = b"".join(e.encode() for e in entries)
    path.unlink(missing_ok=True)
    if not data:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
