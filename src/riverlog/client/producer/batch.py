"""One partition's batch in the producer: the records as they were sent, then the built bytes,
the shared result its records' futures point at, and the bookkeeping of its attempts.

A batch keeps its records unencoded until the sender builds it, as columns: a list of
timestamps, of keys and of values (and of encoded headers, made only when a record has some).
The application thread's `send` only appends to them, creating no object per record that the
garbage collector tracks (a tuple per record did, and the collections cost about a tenth of the
producer's CPU; decision 0015's addendum); the whole batch is encoded at once by
`encode_records`. Building drops the records, so a batch holds either its records or its
bytes, never both; a batch whose producer id, epoch or sequence changed after
it was built (the idempotent producer's rewrite) gets them stamped into its bytes.

Moved between threads under the accumulator's lock: appended to by application threads while
open, then owned by the sender thread from drain to outcome.
"""

from __future__ import annotations

import itertools
import struct
from typing import Any, Final

import crc32c as _crc32c

from riverlog.common.records.builder import finish_batch_pieces
from riverlog.common.records.compression import CompressionType
from riverlog.common.records.encode_columns import encode_records
from riverlog.common.records.header import (
    CRC_START,
    HEADER_SIZE,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
)

from .future import BatchResult

RECORD_OVERHEAD: Final = 11
"""Bytes a record takes beyond its key, value and headers, counted while the batch is open: an
upper bound for records under 8 KiB (length, attributes, timestamp and offset deltas, the key
and value lengths and the header count), so a built batch stays within batch.size."""

_SERIALS = itertools.count()  # next() is atomic: batches of all producers
_PRODUCER_FIELDS = slice(43, 57)  # producerId, producerEpoch, baseSequence in the header
_PRODUCER_STRUCT_FORMAT: Final = ">qhi"

Record = tuple[int, bytes | None, bytes | None, bytes | None]
"""(timestamp, key, value, encoded headers or None)"""


class ProducerBatch:
    """One partition's batch, from the first append to its outcome.

    Lifecycle: open (appended to under the accumulator lock) → closed (full, or drained) →
    `data` built by the sender → in flight → completed, or re-enqueued for a retry with the same
    bytes. `created` and `retry_at` are in the accumulator clock's seconds. `estimate` is the
    batch's size while open (header plus RECORD_OVERHEAD per record beyond its bytes); `limit`
    is batch.size.
    """

    __slots__ = (
        "_joined",
        "attempts",
        "base_sequence",
        "body",
        "closed",
        "compression",
        "count",
        "created",
        "estimate",
        "header_bytes",
        "headers",
        "keys",
        "last_error",
        "limit",
        "maybe_written",
        "owner",
        "partition",
        "producer_epoch",
        "producer_id",
        "reserved",
        "result",
        "retry_at",
        "serial",
        "stamped",
        "timestamps",
        "topic",
        "trace_context",
        "transactional",
        "values",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        created: float,
        *,
        batch_size: int | None = None,
        compression: CompressionType = CompressionType.NONE,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.result = BatchResult(topic, partition)
        self.created = created
        self.serial = next(_SERIALS)  # creation order (`created` may tie)
        # The records while open: one entry per record in each column; `headers` is None
        # while no record has any.
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[bytes | None] | None = None
        self.count = 0
        self.estimate = HEADER_SIZE
        self.limit = batch_size if batch_size is not None else 1 << 62
        self.compression = compression
        self.closed = False
        # Built: the 61-byte header and the records, kept apart (the request joins them once).
        self.header_bytes: bytes | None = None
        self.body: bytes | None = None
        self._joined: bytes | None = None
        self.attempts = 0
        self.last_error: BaseException | None = None
        self.retry_at = 0.0
        self.reserved = 0
        self.trace_context: Any = None
        # Idempotence: the (producer id, epoch) and first sequence the bytes carry.
        self.owner: Any = None
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = -1
        self.stamped: tuple[int, int, int] = (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, -1)
        # An attempt ended with no leader answer saying it was refused: it may be in the log.
        self.maybe_written = False
        # Part of a transaction: the batch header's transactional bit (set before the build).
        self.transactional = False

    def append(self, record: Record) -> bool:
        """Add one record (the general path; the accumulator inlines the common case). False,
        and nothing added, if the batch holds records and this one would take it past
        batch.size; the first record is always taken."""
        _, key, value, headers = record
        size = self.estimate + RECORD_OVERHEAD
        size += (len(key) if key else 0) + (len(value) if value else 0)
        size += len(headers) if headers else 0
        if size > self.limit and self.count:
            return False
        self.add(record)
        self.estimate = size
        return True

    def add(self, record: Record) -> None:
        """Put one record in the columns and count it (no size check: `append`, or the
        accumulator's fast path, checked it)."""
        timestamp, key, value, headers = record
        self.timestamps.append(timestamp)
        self.keys.append(key)
        self.values.append(value)
        if headers is not None or self.headers is not None:
            if self.headers is None:
                self.headers = [None] * self.count
            self.headers.append(headers)
        self.count += 1

    @property
    def records(self) -> list[Record]:
        """The records not yet built, as (timestamp, key, value, encoded headers) tuples."""
        headers = self.headers if self.headers is not None else [None] * len(self.values)
        return list(zip(self.timestamps, self.keys, self.values, headers, strict=True))

    def pieces(self) -> tuple[bytes, bytes]:
        """The batch as (header, records): encoded once (retries resend the same bytes, and
        the records are dropped), with the current producer id, epoch and sequence stamped
        into the header. Their concatenation is the batch (`build`)."""
        stamp = (self.producer_id, self.producer_epoch, self.base_sequence)
        header, body = self.header_bytes, self.body
        if header is None or body is None:
            timestamps, keys, values = self.timestamps, self.keys, self.values
            headers = self.headers if self.headers is not None else [None] * len(values)
            header, body = finish_batch_pieces(
                encode_records(timestamps, keys, values, headers),
                self.count,
                timestamps[0],
                max(timestamps),
                compression=self.compression,
                producer_id=stamp[0],
                producer_epoch=stamp[1],
                base_sequence=stamp[2],
                is_transactional=self.transactional,
            )
            self.result.set_records(timestamps, keys, values)
            self.timestamps, self.keys, self.values, self.headers = [], [], [], None
            self.body = body
        elif stamp != self.stamped:
            header = restamp_header(header, body, *stamp)
            self._joined = None
        self.header_bytes = header
        self.stamped = stamp
        return header, body

    def build(self) -> bytes:
        """The batch bytes (`pieces` joined; kept while the stamp holds)."""
        self.pieces()
        data = self.data
        assert data is not None
        return data

    @property
    def data(self) -> bytes | None:
        """The batch bytes once built (joined when first asked for), else None."""
        if self.header_bytes is None or self.body is None:
            return None
        if self._joined is None:
            self._joined = self.header_bytes + self.body
        return self._joined

    @property
    def size(self) -> int:
        """Bytes on the wire if built, else the estimate."""
        if self.header_bytes is None or self.body is None:
            return self.estimate
        return len(self.header_bytes) + len(self.body)

    def __repr__(self) -> str:
        return f"<ProducerBatch {self.topic}-{self.partition} records={self.count}>"


def restamp_header(
    header: bytes, body: bytes, producer_id: int, producer_epoch: int, base_sequence: int
) -> bytes:
    """`restamp` of a batch kept as (header, records): the new header."""
    out = bytearray(header)
    out[_PRODUCER_FIELDS] = struct.pack(
        _PRODUCER_STRUCT_FORMAT, producer_id, producer_epoch, base_sequence
    )
    crc = int(_crc32c.crc32c(body, _crc32c.crc32c(memoryview(out)[CRC_START:])))
    out[CRC_START - 4 : CRC_START] = crc.to_bytes(4, "big")
    return bytes(out)


def restamp(data: bytes, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
    """`data` with another producer id, epoch and base sequence, and its CRC recomputed: the
    joined form of `restamp_header`, which the producer uses (this one only in tests)."""
    header, body = data[:HEADER_SIZE], data[HEADER_SIZE:]
    return restamp_header(header, body, producer_id, producer_epoch, base_sequence) + body
