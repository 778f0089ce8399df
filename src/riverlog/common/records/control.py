"""Control batches: the commit and abort markers that end a transaction in a partition
(Kafka's ControlRecordType and EndTransactionMarker, KIP-98).

A marker is a RecordBatch v2 with the control bit (0x20) and the transactional bit (0x10) set,
the transaction's producer id and epoch, baseSequence -1, no compression, CreateTime, and
exactly one record whose key and value are (big-endian):

    key    version            int16  0
           type               int16  0 ABORT, 1 COMMIT
    value  version            int16  0
           coordinator epoch  int32  the epoch of the transaction coordinator that wrote it

Consumers never see the record: a reader skips control batches unless asked for them. The
builder is pure (bytes out, offsets assigned later by the partition leader), the parser checks
every field it reads and raises InvalidBatchError on anything Kafka would not have written.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from .builder import BatchBuilder
from .header import NO_SEQUENCE, BatchHeader, InvalidBatchError, validate_batch
from .reader import iter_batches_records

CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordType(enum.IntEnum):
    """Kafka's ControlRecordType (the marker types; KIP-996's leader-change types are not
    written by Riverlog)."""

    ABORT = 0
    COMMIT = 1


class TransactionResult(enum.IntEnum):
    """Kafka's TransactionResult, as WriteTxnMarkersRequest carries it (committed: true)."""

    ABORT = 0
    COMMIT = 1

    @property
    def control_type(self) -> ControlRecordType:
        return ControlRecordType(int(self))


@dataclass(frozen=True, slots=True)
class EndTxnMarker:
    """What a marker says: commit or abort, and the coordinator epoch that wrote it."""

    control_type: ControlRecordType
    coordinator_epoch: int

    @property
    def is_commit(self) -> bool:
        return self.control_type is ControlRecordType.COMMIT


def control_key(control_type: ControlRecordType) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, int(control_type))


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def build_end_txn_marker(
    marker: EndTxnMarker,
    producer_id: int,
    producer_epoch: int,
    timestamp_ms: int,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The control batch of `marker` (Kafka's MemoryRecords.withEndTransactionMarker), at base
    offset 0: the leader assigns the offset and stamps its epoch when it appends it."""
    if producer_id < 0:
        raise ValueError(f"a marker needs a producer id, got {producer_id}")
    builder = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
    builder.append(
        timestamp_ms,
        control_key(marker.control_type),
        end_txn_marker_value(marker.coordinator_epoch),
    )
    return builder.build()


def parse_control_type(key: bytes | None) -> ControlRecordType:
    """The type a control record's key names; raises InvalidBatchError."""
    if key is None or len(key) < _KEY.size:
        raise InvalidBatchError(f"control record key of {0 if key is None else len(key)} bytes")
    version, kind = _KEY.unpack_from(key)
    if version != CONTROL_KEY_VERSION:
        raise InvalidBatchError(f"unknown control key version {version}")
    try:
        return ControlRecordType(kind)
    except ValueError:
        raise InvalidBatchError(f"unknown control record type {kind}") from None


def parse_end_txn_marker(batch: bytes | bytearray | memoryview, pos: int = 0) -> EndTxnMarker:
    """The marker in the control batch at `pos` (CRC checked); raises InvalidBatchError when it
    is not a well-formed commit or abort marker."""
    header = validate_batch(batch, pos)
    check_marker_header(header)
    data = bytes(memoryview(batch)[pos : pos + header.size])
    records = list(iter_batches_records(data, include_control=True))
    if len(records) != 1:
        raise InvalidBatchError(f"a marker batch holds {len(records)} records, not 1")
    record = records[0]
    kind = parse_control_type(record.key)
    value = record.value
    if value is None or len(value) < _VALUE.size:
        raise InvalidBatchError("end transaction marker value too short")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise InvalidBatchError(f"invalid end transaction marker version {version}")
    return EndTxnMarker(kind, coordinator_epoch)


def check_marker_header(header: BatchHeader) -> None:
    """The header fields every marker batch has; raises InvalidBatchError."""
    if not header.is_control or not header.is_transactional:
        raise InvalidBatchError("a marker batch needs the control and transactional bits")
    if header.producer_id < 0:
        raise InvalidBatchError("a marker batch needs a producer id")
    if header.records_count != 1 or header.last_offset_delta != 0:
        raise InvalidBatchError(f"a marker batch holds {header.records_count} records, not 1")
    if header.compression:
        raise InvalidBatchError("a marker batch is never compressed")
