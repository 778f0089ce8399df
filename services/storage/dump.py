"""Human-readable dumps of a partition's storage files, line by line (Kafka's DumpLogSegments), for
`riverlog dump-log PATH`.

- `.log`: one line per batch (`baseOffset: 0 lastOffset: 4 count: 5 ... position: 0
  CreateTime: 1700000000000 size: 366 magic: 2 compresscodec: none crc: 1234 isvalid: true`),
  and with `records=True` one `| offset: ...` line per record after it, decoded by the shared
  codec. A batch whose CRC fails is shown with `isvalid: false`; bytes that are not a batch
  (torn tail, garbage) end the dump with a line saying how many and why.
- `.index`: `offset: X position: Y` per entry; `.timeindex`: `timestamp: T offset: O`.
  Entries are absolute offsets. An untrimmed (preallocated) index ends at its first zero entry.
- `.txnindex`: `version: 0 producerId: P firstOffset: F lastOffset: L lastStableOffset: S`
  per aborted transaction, as Kafka's.
- `.snapshot` (producer state, `producer/snapshot.py`): one `producerId: P producerEpoch: E
  coordinatorEpoch: C currentTxnFirstOffset: F lastTimestamp: T` line per producer (as Kafka's,
  -1 for none), then one `| firstSequence: ... lastOffset: ... timestamp: ...` line per batch
  it remembers (Kafka keeps one, Riverlog five).
- `leader-epoch-checkpoint` (`log/leader_epoch_cache.py`): `epoch: E startOffset: O` per entry.

A remote segment's objects (tiered storage) are named `<segment id><suffix>` instead of by
offset, with `.leader-epoch-checkpoint` as the checkpoint's suffix; they dump the same way, the
base offset taken from the `.log` of the same name. The formats are read by the storage code's
own readers (the log's indexes, the producer snapshot decoder, the checkpoint parser), so this
module has no parser of its own but the batch headers'. Files are opened read-only and nothing
is written, so it is safe on a live log directory. It sits above `producer` and `log` in the
storage layers and is the one service module the CLI imports (`riverlog dump-log`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from riverlog.common.records import CompressionType, iter_batches_records
from riverlog.common.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    InvalidBatchError,
    parse_header,
    validate_batch,
)

from .log.checkpoint import CorruptCheckpointError
from .log.leader_epoch_cache import LEADER_EPOCH_CHECKPOINT, epoch_checkpoint
from .log.loader import parse_base_offset
from .log.offset_index import OffsetIndex
from .log.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from .log.time_index import TimeIndex
from .log.txn_index import TXN_INDEX_VERSION, decode_entries
from .producer.snapshot import SNAPSHOT_SUFFIX, CorruptSnapshotError, decode, snapshot_offset

_MAX_SHOWN = 64
KINDS = f".log, .index, .timeindex, .txnindex, {SNAPSHOT_SUFFIX} or {LEADER_EPOCH_CHECKPOINT}"


def dump_segment(path: Path | str, records: bool = False) -> Iterator[str]:
    """The lines describing the storage file at `path` (one of KINDS)."""
    path = Path(path)
    yield f"Dumping {path}"
    if path.name == LEADER_EPOCH_CHECKPOINT or path.suffix == f".{LEADER_EPOCH_CHECKPOINT}":
        yield from _dump_epoch_checkpoint(path)
    elif path.suffix == LOG_SUFFIX:
        yield from _dump_log(path, records)
    elif path.suffix == INDEX_SUFFIX:
        yield from _dump_offset_index(path)
    elif path.suffix == TIME_INDEX_SUFFIX:
        yield from _dump_time_index(path)
    elif path.suffix == TXN_INDEX_SUFFIX:
        for e in decode_entries(path.read_bytes()):
            yield (
                f"version: {TXN_INDEX_VERSION} producerId: {e.producer_id} firstOffset: "
                f"{e.first_offset} lastOffset: {e.last_offset} lastStableOffset: "
                f"{e.last_stable_offset}"
            )
    elif path.suffix == SNAPSHOT_SUFFIX:
        yield from _dump_producer_snapshot(path)
    else:
        raise ValueError(f"{path}: not a {KINDS} file")


def _base_offset(path: Path) -> int:
    """The base offset in the name, or (a remote segment's objects, named by segment id: see
    tiered storage) the first batch's base offset in the `.log` of the same name."""
    base = parse_base_offset(path)
    if base is not None:
        return base
    log = path.with_suffix(LOG_SUFFIX)
    try:
        with log.open("rb") as f:
            head = f.read(HEADER_SIZE)
        return parse_header(head).base_offset
    except (OSError, InvalidBatchError):
        raise ValueError(
            f"{path}: the name is not a 20-digit base offset and {log.name} has no batch to "
            "take it from"
        ) from None


def _show(data: bytes | None) -> str:
    if data is None:
        return "null"
    text = data[:_MAX_SHOWN].decode("utf-8", errors="backslashreplace")
    return text + ("..." if len(data) > _MAX_SHOWN else "")


def _compression_name(code: int) -> str:
    try:
        return CompressionType(code).name.lower()
    except ValueError:
        return f"unknown({code})"


def _dump_log(path: Path, records: bool) -> Iterator[str]:
    yield f"Log starting offset: {_base_offset(path)}"
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        position = 0
        while position < size:
            head = os.pread(fd, HEADER_SIZE, position)
            problem = _header_problem(head, position, size)
            if problem:
                yield f"Found {size - position} invalid bytes at position {position}: {problem}"
                return
            header = parse_header(head)
            batch = os.pread(fd, header.size, position)
            try:
                validate_batch(batch)
                valid = True
            except InvalidBatchError:
                valid = False
            ts_name = "LogAppendTime" if header.timestamp_type else "CreateTime"
            yield (
                f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
                f"count: {header.records_count} baseSequence: {header.base_sequence} "
                f"lastSequence: {header.last_sequence} producerId: {header.producer_id} "
                f"producerEpoch: {header.producer_epoch} "
                f"partitionLeaderEpoch: {header.partition_leader_epoch} "
                f"isTransactional: {str(header.is_transactional).lower()} "
                f"isControl: {str(header.is_control).lower()} position: {position} "
                f"{ts_name}: {header.max_timestamp} size: {header.size} magic: {header.magic} "
                f"compresscodec: {_compression_name(header.compression)} crc: {header.crc} "
                f"isvalid: {str(valid).lower()}"
            )
            if records and valid:
                yield from _dump_records(batch, ts_name)
            position += header.size
    finally:
        os.close(fd)


def _header_problem(head: bytes, position: int, size: int) -> str:
    if len(head) < HEADER_SIZE:
        return f"a torn batch header ({len(head)} of {HEADER_SIZE} bytes)"
    header = parse_header(head)
    if header.magic != MAGIC:
        return f"unsupported magic {header.magic}"
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        return f"batch length {header.batch_length} below the header size"
    if position + header.size > size:
        return f"a torn batch ({header.size} bytes declared, {size - position} left)"
    return ""


def _dump_records(batch: bytes, ts_name: str) -> Iterator[str]:
    try:
        for record in iter_batches_records(batch, validate_crc=False, include_control=True):
            key_size = -1 if record.key is None else len(record.key)
            value_size = -1 if record.value is None else len(record.value)
            header_keys = ", ".join(key for key, _ in record.headers)
            yield (
                f"| offset: {record.offset} {ts_name}: {record.timestamp} "
                f"keySize: {key_size} valueSize: {value_size} headerKeys: [{header_keys}] "
                f"key: {_show(record.key)} payload: {_show(record.value)}"
            )
    except InvalidBatchError as exc:
        yield f"| cannot decode the records: {exc}"


def _dump_offset_index(path: Path) -> Iterator[str]:
    base = _base_offset(path)
    data = path.read_bytes()
    usable = len(data) - len(data) % OffsetIndex.ENTRY_SIZE
    for slot, (relative, position) in enumerate(OffsetIndex.ENTRY.iter_unpack(data[:usable])):
        if slot > 0 and relative == 0:
            break  # the zero-filled, preallocated tail of an active index
        yield f"offset: {base + relative} position: {position}"
    if usable != len(data):
        yield f"Found {len(data) - usable} trailing bytes (not a whole entry)"


def _dump_time_index(path: Path) -> Iterator[str]:
    base = _base_offset(path)
    data = path.read_bytes()
    usable = len(data) - len(data) % TimeIndex.ENTRY_SIZE
    for slot, (timestamp, relative) in enumerate(TimeIndex.ENTRY.iter_unpack(data[:usable])):
        if slot > 0 and timestamp == 0 and relative == 0:
            break
        yield f"timestamp: {timestamp} offset: {base + relative}"
    if usable != len(data):
        yield f"Found {len(data) - usable} trailing bytes (not a whole entry)"


def _dump_producer_snapshot(path: Path) -> Iterator[str]:
    offset = snapshot_offset(path)
    if offset is not None:
        yield f"Producer state as of offset: {offset}"
    try:
        entries = decode(path.read_bytes())
    except CorruptSnapshotError as exc:
        yield f"Found an invalid producer snapshot: {exc}"
        return
    for e in entries:
        yield (
            f"producerId: {e.producer_id} producerEpoch: {e.producer_epoch} "
            f"coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {e.current_txn_first_offset} "
            f"lastTimestamp: {e.last_timestamp}"
        )
        for b in e.batches:
            yield (
                f"| firstSequence: {b.first_seq} lastSequence: {b.last_seq} "
                f"firstOffset: {b.first_offset} lastOffset: {b.last_offset} "
                f"timestamp: {b.timestamp}"
            )


def _dump_epoch_checkpoint(path: Path) -> Iterator[str]:
    try:
        entries = epoch_checkpoint(path).read()
    except CorruptCheckpointError as exc:
        yield f"Found an invalid leader-epoch checkpoint: {exc.message}"
        return
    for entry in entries:
        yield f"epoch: {entry.epoch} startOffset: {entry.start_offset}"
