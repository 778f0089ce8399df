"""Encode records into one RecordBatch v2, the way a Kafka producer's MemoryRecordsBuilder does.

The producer appends records to a BatchBuilder per partition until `append` refuses one
(batch.size reached) and then calls `build()`: the 61-byte header of `header.py` (base offset 0,
for the leader to rewrite), then the records of `record.py`, compressed as a whole when a codec
is set, with the CRC-32C over attributes..end. Deterministic: the same appends give the same
bytes; uncompressed, they are byte-identical to kafka-python's (tests/.../test_records_golden.py),
with partition leader epoch -1 as Kafka's Java producer writes it.

This is the producer's per-record hot loop, so `append` avoids Python-level calls on the common
path: varints of one or two bytes come from the precomputed `varint.ENCODED` table, and a record
is kept as a tuple of byte strings until `build()` joins them all with one `bytes.join`.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Sequence
from typing import Final

import crc32c as _crc32c

from .compression import CompressionType, compress
from .header import (
    CONTROL_MASK,
    CRC_START,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from .record import CREATE_TIME, LOG_APPEND_TIME, Header
from .varint import ENCODED, encode_varint, encode_varint32

_NULL: Final = b"\x01"  # varint -1: a null key or value
_ZERO: Final = b"\x00"  # attributes 0, or zero headers
_EMPTY: Final = b""
_CRC: Final = struct.Struct(">I")
_INT64_MAX: Final = (1 << 63) - 1
NO_TIMESTAMP: Final = -1


def _as_bytes(data: object, what: str) -> bytes:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"record {what} must be bytes or None, not {type(data).__name__}")


def _negative_delta(timestamp_ms: int, delta: int) -> bytes:
    if timestamp_ms < -1:
        raise ValueError(f"invalid timestamp {timestamp_ms}")
    return encode_varint(delta)


def encode_headers(headers: Sequence[Header]) -> bytes:
    """The headers count and headers of one record."""
    parts = [encode_varint32(len(headers))]
    for key, value in headers:
        if not isinstance(key, str):
            raise TypeError(f"header key must be str, not {type(key).__name__}")
        raw = key.encode("utf-8")
        parts.append(encode_varint32(len(raw)))
        parts.append(raw)
        if value is None:
            parts.append(_NULL)
        else:
            value = _as_bytes(value, "header value")
            parts.append(encode_varint32(len(value)))
            parts.append(value)
    return b"".join(parts)


class BatchBuilder:
    """Accumulates the records of one batch; `build()` returns its bytes.

    Lifecycle: create, `append` until it returns False (or until done), `build()`. `build()` is
    a pure function of what was appended, so it may be called again after more appends. Used by
    one task at a time (no locking). Keys and values are referenced, not copied, until `build()`
    (bytes are immutable; a bytearray or memoryview is copied on append).

    The producer fields (`producer_id`, `producer_epoch`, `base_sequence`, `is_transactional`)
    are plain attributes, so an idempotent producer can set them when it drains the batch.
    """

    __slots__ = (
        "_base_ts",
        "_count",
        "_limit",
        "_max_ts",
        "_parts",
        "_size",
        "base_sequence",
        "compression",
        "compression_level",
        "is_control",
        "is_transactional",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "timestamp_type",
    )

    def __init__(
        self,
        compression: CompressionType = CompressionType.NONE,
        *,
        batch_size: int | None = None,
        compression_level: int | None = None,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
        is_control: bool = False,
        timestamp_type: int = CREATE_TIME,
        partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    ) -> None:
        """`batch_size`: once the batch holds a record, `append` refuses any record that would
        take `size_in_bytes` past it (Kafka's batch.size; None: no limit). `compression_level`:
        None for Kafka's default of the codec."""
        self.compression = CompressionType(compression)
        self.compression_level = compression_level
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control = is_control
        if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
            raise ValueError(f"unknown timestamp type {timestamp_type}")
        self.timestamp_type = timestamp_type
        self.partition_leader_epoch = partition_leader_epoch
        self._limit = sys.maxsize if batch_size is None else batch_size
        self._parts: list[bytes] = []
        self._size = HEADER_SIZE
        self._count = 0
        self._base_ts = NO_TIMESTAMP
        self._max_ts = NO_TIMESTAMP

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the batch so far before compression: header plus encoded records."""
        return self._size

    @property
    def base_timestamp(self) -> int:
        """The first record's timestamp (-1 while empty)."""
        return self._base_ts

    @property
    def max_timestamp(self) -> int:
        """The largest timestamp appended (-1 while empty)."""
        return self._max_ts

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> bool:
        """Add a record at the next offset delta. False, and nothing added, if the batch already
        holds a record and this one would take it past `batch_size`; the first record of a batch
        is always accepted, however large."""
        count = self._count
        if count:
            delta = timestamp_ms - self._base_ts
        else:
            if not -1 <= timestamp_ms <= _INT64_MAX:
                raise ValueError(f"invalid timestamp {timestamp_ms}")
            self._base_ts = self._max_ts = timestamp_ms
            delta = 0
        if key is not None and type(key) is not bytes:
            key = _as_bytes(key, "key")
        if value is not None and type(value) is not bytes:
            value = _as_bytes(value, "value")
        enc = ENCODED
        try:
            tpart = enc[delta << 1] if delta >= 0 else _negative_delta(timestamp_ms, delta)
            opart = enc[count << 1]
            kpart = _NULL if key is None else enc[len(key) << 1]
            vpart = _NULL if value is None else enc[len(value) << 1]
        except IndexError:  # a varint longer than 2 bytes: the general encoders, with checks
            tpart = encode_varint(delta)
            opart = encode_varint32(count)
            kpart = _NULL if key is None else encode_varint32(len(key))
            vpart = _NULL if value is None else encode_varint32(len(value))
        key = key or _EMPTY
        value = value or _EMPTY
        hpart = encode_headers(headers) if headers else _ZERO
        body = (
            1
            + len(tpart)
            + len(opart)
            + len(kpart)
            + len(key)
            + len(vpart)
            + len(value)
            + len(hpart)
        )
        try:
            lpart = enc[body << 1]
        except IndexError:
            lpart = encode_varint32(body)
        size = self._size + len(lpart) + body
        if size > self._limit and count:
            return False
        self._parts += (lpart, _ZERO, tpart, opart, kpart, key, vpart, value, hpart)
        self._size = size
        self._count = count + 1
        if timestamp_ms > self._max_ts:
            self._max_ts = timestamp_ms
        return True

    def build(self) -> bytes:
        """The whole batch: header, then the records (compressed when a codec is set)."""
        count = self._count
        if not count:
            raise ValueError("a record batch needs at least one record")
        return finish_batch(
            b"".join(self._parts),
            count,
            self._base_ts,
            self._max_ts,
            compression=self.compression,
            compression_level=self.compression_level,
            producer_id=self.producer_id,
            producer_epoch=self.producer_epoch,
            base_sequence=self.base_sequence,
            is_transactional=self.is_transactional,
            is_control=self.is_control,
            timestamp_type=self.timestamp_type,
            partition_leader_epoch=self.partition_leader_epoch,
        )


def finish_batch(
    records: bytes,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = CREATE_TIME,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A whole batch around `count` encoded records (`finish_batch_pieces`, joined)."""
    header, body = finish_batch_pieces(
        records,
        count,
        base_timestamp,
        max_timestamp,
        compression=compression,
        compression_level=compression_level,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
        timestamp_type=timestamp_type,
        partition_leader_epoch=partition_leader_epoch,
    )
    return header + body


def finish_batch_pieces(
    records: bytes,
    count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = CREATE_TIME,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> tuple[bytes, bytes]:
    """A whole batch around `count` encoded records as (the 61-byte header, the records,
    compressed when a codec is set), the CRC-32C over attributes..end in the header; their
    concatenation is the batch, left to the caller (the SDK's request joins it once)."""
    codec = CompressionType(compression)
    if codec:
        records = compress(codec, records, compression_level)
    attributes = int(codec)
    if timestamp_type == LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    try:
        header = HEADER_STRUCT.pack(
            0,  # base offset: the leader assigns it
            HEADER_SIZE + len(records) - LOG_OVERHEAD,
            partition_leader_epoch,
            MAGIC,
            0,  # CRC, below
            attributes,
            count - 1,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    except struct.error as e:
        raise ValueError(f"batch field out of range: {e}") from e
    crc = _crc32c.crc32c(records, _crc32c.crc32c(header[CRC_START:]))
    return header[: CRC_START - 4] + _CRC.pack(crc) + header[CRC_START:], records
