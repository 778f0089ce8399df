"""Producer-state snapshot files: `<offset as 20 digits>.snapshot` in the partition directory.

A snapshot holds the state of every producer as of `offset` (everything below it applied), so
loading a partition replays batch headers from the latest snapshot instead of from the start of
the log. Compact and self-checking, in the spirit of Kafka's version-1 snapshot, but keeping all
five remembered batches of a producer (Kafka keeps one, so a restarted Kafka broker detects a
retry of the last batch only). Big-endian:

    offset  size  field
    0       2     version           int16   2
    2       4     crc               uint32  CRC-32C of every byte after this field
    6       4     producer count    int32
    then per producer:
            8     producer id       int64
            2     producer epoch    int16
            8     last timestamp    int64
            8     current txn first offset  int64  -1: no open transaction   (version 2)
            4     coordinator epoch int32   of its last marker, -1: none       (version 2)
            1     batch count       int8    0..5, oldest first
            32    per batch: first sequence int32, last sequence int32,
                  first offset int64, last offset int64, max timestamp int64

Version 1 (before transactions) lacks the two version-2 fields and is still read; a version-1
snapshot has no open transaction, since no transactional batch was written before version 2.

Written to `<name>.tmp`, fsynced and renamed, so a crash leaves the old file or the new one.
A file that is short, of another version or fails its CRC is not trusted: the loader deletes it
and falls back to an older snapshot or to the log.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from riverlog.common.records.header import crc32c

from .entry import BATCH_RETAIN, BatchMetadata, ProducerStateEntry

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX: Final = ".snapshot"
VERSION: Final = 2
_HEAD = struct.Struct(">hIi")
_PRODUCER_V1 = struct.Struct(">qhqb")
_PRODUCER = struct.Struct(">qhqqib")
_BATCH = struct.Struct(">iiqqq")


class CorruptSnapshotError(ValueError):
    """The snapshot file cannot be trusted."""


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offset(path: Path) -> int | None:
    """The offset in a snapshot's file name, or None if it is not a snapshot."""
    if path.suffix != SNAPSHOT_SUFFIX or len(path.stem) != 20 or not path.stem.isdigit():
        return None
    return int(path.stem)


def list_snapshots(directory: Path) -> list[int]:
    """Offsets of the snapshots in `directory`, ascending."""
    try:
        names = list(directory.iterdir())
    except FileNotFoundError:
        return []
    return sorted(o for o in (snapshot_offset(p) for p in names) if o is not None)


def encode(entries: Iterable[ProducerStateEntry]) -> bytes:
    body = bytearray()
    count = 0
    for entry in entries:
        count += 1
        batches = list(entry.batches)
        body += _PRODUCER.pack(
            entry.producer_id,
            entry.producer_epoch,
            entry.last_timestamp,
            entry.current_txn_first_offset,
            entry.coordinator_epoch,
            len(batches),
        )
        for b in batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
    payload = struct.pack(">i", count) + bytes(body)
    return struct.pack(">hI", VERSION, crc32c(payload)) + payload


def decode(data: bytes) -> list[ProducerStateEntry]:
    """The entries in a snapshot's bytes; raises CorruptSnapshotError."""
    if len(data) < _HEAD.size:
        raise CorruptSnapshotError(f"{len(data)} bytes is too short for a snapshot")
    version, crc, count = _HEAD.unpack_from(data)
    if version not in (1, VERSION):
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    if crc32c(memoryview(data)[6:]) != crc:
        raise CorruptSnapshotError("CRC mismatch")
    entries: list[ProducerStateEntry] = []
    pos = _HEAD.size
    try:
        for _ in range(count):
            if version == 1:
                pid, epoch, last_ts, n = _PRODUCER_V1.unpack_from(data, pos)
                txn_first, coordinator_epoch = -1, -1
                pos += _PRODUCER_V1.size
            else:
                pid, epoch, last_ts, txn_first, coordinator_epoch, n = _PRODUCER.unpack_from(
                    data, pos
                )
                pos += _PRODUCER.size
            if not 0 <= n <= BATCH_RETAIN:
                raise CorruptSnapshotError(f"producer {pid}: {n} batches")
            entry = ProducerStateEntry(pid, epoch)
            entry.current_txn_first_offset = txn_first
            entry.coordinator_epoch = coordinator_epoch
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(data, pos)))
                pos += _BATCH.size
            entry.last_timestamp = last_ts
            entries.append(entry)
    except struct.error as exc:
        raise CorruptSnapshotError(f"truncated: {exc}") from None
    if pos != len(data):
        raise CorruptSnapshotError(f"{len(data) - pos} trailing bytes")
    return entries


def write_snapshot(directory: Path, offset: int, entries: Iterable[ProducerStateEntry]) -> Path:
    """Write the snapshot at `offset` durably (temp file, fsync, rename, fsync dir)."""
    path = snapshot_path(directory, offset)
    tmp = path.with_name(path.name + ".tmp")
    data = encode(entries)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def read_snapshot(directory: Path, offset: int) -> list[ProducerStateEntry]:
    """The entries of the snapshot at `offset`; raises CorruptSnapshotError or OSError."""
    return decode(snapshot_path(directory, offset).read_bytes())


def delete_snapshot(directory: Path, offset: int) -> None:
    try:
        snapshot_path(directory, offset).unlink()
    except FileNotFoundError:
        pass
