"""The fixed 61-byte header of a RecordBatch v2, and the few operations the storage path needs.

Storage nodes and gateways work on headers only: they never decode records. Layout (big-endian),
as Kafka's DefaultRecordBatch:

    offset  size  field
    0       8     baseOffset            int64
    8       4     batchLength           int32   bytes after this field (total size - 12)
    12      4     partitionLeaderEpoch  int32
    16      1     magic                 int8    always 2
    17      4     crc                   uint32  CRC-32C of bytes 21..end (attributes onwards)
    21      2     attributes            int16   bits 0-2 compression, 3 timestamp type,
                                                4 transactional, 5 control, 6 delete horizon
    23      4     lastOffsetDelta       int32
    27      8     baseTimestamp         int64
    35      8     maxTimestamp          int64
    43      8     producerId            int64
    51      2     producerEpoch         int16
    53      4     baseSequence          int32
    57      4     recordsCount          int32
    61      ...   records (compressed as a whole when compression is set)

baseOffset and partitionLeaderEpoch sit outside the CRC, so a leader assigns offsets and
stamps its epoch by rewriting them in place, without recomputing the checksum.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c as _crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
MAGIC = 2
CRC_START = 21

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")  # the whole 61-byte header, in order
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_OFFSET_AND_LENGTH = struct.Struct(">qi")

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
# Set by the log cleaner (KIP-534): baseTimestamp holds the time after which the batch's
# tombstones may be removed.
DELETE_HORIZON_MASK = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """CRC-32C (Castagnoli), hardware-accelerated where the CPU has it."""
    return int(_crc32c.crc32c(data))


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch takes, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


class InvalidBatchError(ValueError):
    """The bytes are not a valid RecordBatch v2 (torn, wrong magic, bad length or CRC)."""


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos`; checks that it is complete, not that the batch is."""
    if len(buf) - pos < HEADER_SIZE:
        raise InvalidBatchError(f"truncated batch header at {pos}: {len(buf) - pos} bytes")
    return BatchHeader(*HEADER_STRUCT.unpack_from(buf, pos))


def peek_size(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Total size of the batch at `pos` from its first 12 bytes, or -1 if they are not there.

    Raises InvalidBatchError when the declared length cannot even hold a header, so a negative
    or tiny length is never mistaken for an incomplete batch."""
    if len(buf) - pos < LOG_OVERHEAD:
        return -1
    _, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
    if length < HEADER_SIZE - LOG_OVERHEAD:
        raise InvalidBatchError(f"batch length {length} at {pos} is below the header size")
    return int(length) + LOG_OVERHEAD


def validate_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, max_size: int | None = None
) -> BatchHeader:
    """Parse and fully check the batch at `pos`: magic, length, CRC. Raises InvalidBatchError."""
    header = parse_header(buf, pos)
    if header.magic != MAGIC:
        raise InvalidBatchError(f"unsupported magic {header.magic} at {pos} (only 2)")
    size = header.size
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise InvalidBatchError(f"batch length {header.batch_length} below the header size")
    if max_size is not None and size > max_size:
        raise InvalidBatchError(f"batch of {size} bytes exceeds the limit of {max_size}")
    end = pos + size
    if end > len(buf):
        raise InvalidBatchError(
            f"torn batch at {pos}: {size} bytes declared, {len(buf) - pos} here"
        )
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise InvalidBatchError("negative record count or offset delta")
    actual = crc32c(memoryview(buf)[pos + CRC_START : end])
    if actual != header.crc:
        raise InvalidBatchError(
            f"CRC mismatch at {pos}: stored {header.crc:#010x}, computed {actual:#010x}"
        )
    return header


def iter_batches(
    buf: bytes | bytearray | memoryview, max_size: int | None = None
) -> list[BatchHeader]:
    """Validate every batch of a produce payload; raises on the first invalid one, or on any
    trailing partial batch (a producer payload must be whole batches)."""
    headers: list[BatchHeader] = []
    pos = 0
    n = len(buf)
    if n == 0:
        raise InvalidBatchError("no record batch in the payload")
    while pos < n:
        header = validate_batch(buf, pos, max_size)
        headers.append(header)
        pos += header.size
    return headers


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign offsets to a batch in place (outside the CRC)."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Stamp the leader epoch in place (outside the CRC)."""
    _INT32.pack_into(buf, pos + 12, epoch)
