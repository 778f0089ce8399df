"""Plain records for clients with no batch encoder: the only gateway paths that touch records.

ProduceRecords picks each record's partition (the one given; else Kafka's murmur2 of the key,
as Kafka's default partitioner; else, for records without a key, one partition per request
chosen round robin among the partitions that have a leader, so a request's keyless records
make one batch, as Kafka's sticky partitioner does), encodes each partition's records into
RecordBatch v2 with the shared `BatchBuilder` (a new batch past `BATCH_SIZE`), and sends them
through the ordinary produce path; each record's offset is its batch's base offset plus its
place in the partition. FetchRecords fetches one partition and decodes what came back, skipping
records below the requested offset. Big payloads are encoded and decoded in a worker thread so
the event loop keeps serving other requests meanwhile.

Where the C extension is built, ProduceRecords comes here as the request's bytes
(`EncodedProduceRecords`) and `produce_encoded` encodes the batches and the answer's results
from them in C (`produce_wire`, decision 0045), with the same partitions, batches and results as
`produce`, the path without it.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.partitioner import partition_for_key
from riverlog.common.records import (
    BatchBuilder,
    CompressionType,
    Record,
    produce_wire,
    record_loop,
)
from riverlog.common.records.aborted import AbortedFilter
from riverlog.common.records.builder import encode_headers, finish_batch
from riverlog.common.records.encode_columns import encode_records
from riverlog.common.records.header import InvalidBatchError
from riverlog.common.records.reader import iter_batches_records, next_fetch_offset, records_wire
from riverlog.common.types import IsolationLevel, TopicPartition
from riverlog.common.wire import WireError, read_varint, skip_field

from .context import RequestContext
from .fetch import Fetcher, FetchOptions, FetchPart
from .produce import ProduceOptions, ProducePart, Producer
from .routing.metadata_cache import MetadataCache
from .validation import internal_topic_error, require, topic_error

log = logging.getLogger(__name__)

BATCH_SIZE: Final = 1_000_000
"""Records of one partition go into batches of about this many (uncompressed) bytes, under the
default max.message.bytes of a topic."""

THREAD_THRESHOLD: Final = 256 * 1024
"""Payloads at least this big are encoded or decoded off the event loop."""

DEFAULT_MAX_BYTES: Final = 1024 * 1024

MAX_REQUEST_RECORDS: Final = 4 * 1024 * 1024
"""The most records one ProduceRecords request may carry: the largest request the gateway takes
(256 MiB, gRPC's max message length, Riverlog's max.request.size) over 64 bytes, about what a
record costs the gateway however small it is (its RecordBatch body, its place, its result and
the answer's bytes). A record takes 2 bytes of the request at least, so without this a request
of empty records made the gateway allocate ~44 times its size; with it a request costs the
gateway about the largest request at most. Over it: RECORD_LIST_TOO_LARGE, before anything is
allocated for the records."""


def too_many_records(count: int) -> RiverlogError | None:
    """RECORD_LIST_TOO_LARGE for a request of `count` records, over MAX_REQUEST_RECORDS."""
    if count <= MAX_REQUEST_RECORDS:
        return None
    return RiverlogError(
        f"a ProduceRecords request may carry at most {MAX_REQUEST_RECORDS} records, this one "
        f"has {'more' if count == MAX_REQUEST_RECORDS + 1 else count}: send them in smaller "
        "requests",
        ErrorCode.RECORD_LIST_TOO_LARGE,
    )


def count_records(data: bytes, limit: int) -> tuple[int, bytes] | None:
    """The records (field 3) of a serialized ProduceRecordsRequest, counted up to `limit + 1`,
    and the request's other fields seen until then (their bytes, for protobuf to read): how the
    path without the C extension finds a request over MAX_REQUEST_RECORDS before protobuf makes
    a message of each record. None for bytes with no well-formed field there (protobuf's parse
    then says why)."""
    view = memoryview(data)
    end = len(data)
    pos = count = 0
    rest: list[bytes] = []
    try:
        while pos < end and count <= limit:
            start = pos
            tag, pos = read_varint(data, pos, end)
            pos = skip_field(data, pos, end, tag & 7)
            if tag == 0x1A:  # records, length-delimited
                count += 1
            else:
                rest.append(bytes(view[start:pos]))
    except WireError:
        return None
    return count, b"".join(rest)


@dataclass(frozen=True, slots=True)
class RecordResult:
    """Where one produced record went, or why it did not."""

    partition: int
    offset: int = -1
    error_code: int = ErrorCode.NONE
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class EncodedProduceRecords:
    """A ProduceRecordsRequest as it came off the wire: its bytes, and its fields other than the
    records, read in C (`produce_wire.request_fields`)."""

    data: bytes
    topic: str
    partition: int | None
    acks: int
    timeout_ms: int
    compression_type: str
    record_count: int

    @classmethod
    def parse(cls, data: bytes) -> EncodedProduceRecords:
        """ValueError for bytes that are no ProduceRecordsRequest."""
        return cls(data, *produce_wire.request_fields(data))

    def ByteSize(self) -> int:
        return len(self.data)


@dataclass(frozen=True, slots=True)
class ProducedRecords:
    """The answer of `produce_encoded`: one result per record, in request order, either as
    `RecordResult`s or already encoded (ProduceRecordsResponse's `results` field)."""

    results: Sequence[RecordResult] = ()
    results_wire: bytes = b""
    ok: int = 0
    """How many records were appended (or sent with acks=0)."""


@dataclass(frozen=True, slots=True)
class FetchedRecords:
    error_code: int = ErrorCode.NONE
    error_message: str = ""
    records: Sequence[Record] = ()
    high_watermark: int = -1
    log_start_offset: int = -1
    next_offset: int = -1
    records_wire: bytes | bytearray = b""
    """The records already encoded as FetchRecordsResponse's repeated `records` field (from
    C, `records_wire`), instead of `records`, where the C extension is built."""
    last_stable_offset: int = -1


class PlainRecords:
    """Handles ProduceRecords and FetchRecords. The only state is the round-robin counter for
    keyless records; used from the gateway's event loop only."""

    def __init__(
        self,
        cache: MetadataCache,
        producer: Producer,
        fetcher: Fetcher,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.cache = cache
        self.producer = producer
        self.fetcher = fetcher
        self.clock = clock
        self._round_robin = itertools.count()

    # --- produce ------------------------------------------------------------------------------

    async def produce(
        self,
        ctx: RequestContext,
        topic: str,
        partition: int | None,
        records: Sequence[Record],
        options: ProduceOptions,
        compression_type: str,
    ) -> list[RecordResult]:
        """One result per record, in request order; RiverlogError for a request wrong as a
        whole (bad topic name or compression type, negative partition, unknown acks)."""
        codec, options = self._check(topic, partition, options, compression_type)
        if not records:
            return []
        too_many = too_many_records(len(records))  # the gRPC handler counted them before
        if too_many is not None:
            raise too_many
        count = self._partition_count(topic, partition)
        if isinstance(count, RecordResult):
            return [count] * len(records)

        results: list[RecordResult | None] = [None] * len(records)
        by_partition: dict[int, list[int]] = {}
        sticky = -1
        for index, record in enumerate(records):
            if record.timestamp < 0:
                results[index] = RecordResult(
                    -1,
                    -1,
                    ErrorCode.INVALID_TIMESTAMP,
                    f"record {index} has a negative timestamp ({record.timestamp})",
                )
                continue
            if partition is not None:
                chosen = partition
            elif record.key is not None:
                chosen = partition_for_key(record.key, count)
            else:
                if sticky < 0:
                    sticky = self._next_sticky(topic)
                chosen = sticky
            by_partition.setdefault(chosen, []).append(index)

        now = self.clock.time_ms()
        groups = sorted(by_partition.items())
        size = sum(len(r.value or b"") + len(r.key or b"") for r in records)
        encode = [(p, [records[i] for i in idx]) for p, idx in groups]
        if size >= THREAD_THRESHOLD:
            payloads = await asyncio.to_thread(_encode_all, encode, codec, now)
        else:
            payloads = _encode_all(encode, codec, now)
        parts = [
            ProducePart(TopicPartition(topic, p), data)
            for (p, _), data in zip(groups, payloads, strict=True)
        ]
        part_results = await self.producer.produce(ctx, options, parts)
        for (p, indexes), outcome in zip(groups, part_results, strict=True):
            for position, index in enumerate(indexes):
                if outcome.error_code != ErrorCode.NONE:
                    results[index] = RecordResult(p, -1, outcome.error_code, outcome.error_message)
                elif outcome.base_offset < 0:  # acks=0: no offsets assigned
                    results[index] = RecordResult(p, -1)
                else:
                    results[index] = RecordResult(p, outcome.base_offset + position)
        return [
            r if r is not None else RecordResult(-1, -1, ErrorCode.UNKNOWN_SERVER_ERROR)
            for r in results
        ]

    async def produce_encoded(
        self, ctx: RequestContext, request: EncodedProduceRecords, options: ProduceOptions
    ) -> ProducedRecords:
        """`produce` from the request's bytes, in C: the same partitions, batches and results
        (encoded); RiverlogError as `produce`, and INVALID_REQUEST for malformed records."""
        topic, partition = request.topic, request.partition
        codec, options = self._check(topic, partition, options, request.compression_type)
        if not request.record_count:
            return ProducedRecords()
        too_many = too_many_records(request.record_count)
        if too_many is not None:
            raise too_many
        count = self._partition_count(topic, partition)
        if isinstance(count, RecordResult):
            return ProducedRecords([count] * request.record_count)
        try:
            groups, assign, bad = produce_wire.request_batches(
                request.data,
                partition,
                count,
                lambda: self._next_sticky(topic),
                self.clock.time_ms(),
                BATCH_SIZE,
            )
        except ValueError as exc:
            raise RiverlogError(str(exc), ErrorCode.INVALID_REQUEST) from None
        if codec and len(request.data) >= THREAD_THRESHOLD:
            payloads = await asyncio.to_thread(_finish_all, groups, codec)
        else:
            payloads = _finish_all(groups, codec)
        parts = [
            ProducePart(TopicPartition(topic, p), data)
            for (p, _, _), data in zip(groups, payloads, strict=True)
        ]
        outcomes = await self.producer.produce(ctx, options, parts)
        wire = produce_wire.results_wire(
            assign,
            [p for p, _, _ in groups],
            [o.base_offset for o in outcomes],
            [int(o.error_code) for o in outcomes],
            [o.error_message for o in outcomes],
            ErrorCode.INVALID_TIMESTAMP,
            [f"record {index} has a negative timestamp ({ts})" for index, ts in bad],
        )
        ok = sum(
            n
            for (_, _, n), o in zip(groups, outcomes, strict=True)
            if o.error_code == ErrorCode.NONE
        )
        return ProducedRecords(results_wire=wire, ok=ok)

    def _check(
        self, topic: str, partition: int | None, options: ProduceOptions, compression_type: str
    ) -> tuple[CompressionType, ProduceOptions]:
        bad_topic = topic_error(topic) or internal_topic_error(topic, "append to")
        if bad_topic is not None:
            raise bad_topic
        codec = _codec(compression_type)
        options = self.producer.check(options)
        require(partition is None or partition >= 0, f"partition {partition} is negative")
        return codec, options

    def _partition_count(self, topic: str, partition: int | None) -> int | RecordResult:
        """The topic's partition count, or the result of every record when there is no such
        topic or partition."""
        try:
            count = self.cache.partition_count(topic)
        except RiverlogError as exc:
            return RecordResult(-1 if partition is None else partition, -1, exc.code, exc.message)
        if partition is not None and partition >= count:
            error = RiverlogError(
                f"topic {topic!r} has {count} partitions; there is no partition {partition}",
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            )
            return RecordResult(partition, -1, error.code, error.message)
        return count

    def _next_sticky(self, topic: str) -> int:
        available = self.cache.available_partitions(topic)
        return available[next(self._round_robin) % len(available)]

    # --- fetch --------------------------------------------------------------------------------

    async def fetch(
        self,
        ctx: RequestContext,
        tp: TopicPartition,
        offset: int,
        *,
        max_records: int,
        max_bytes: int,
        max_wait_ms: int,
        isolation_level: IsolationLevel | None,
        rack_id: str = "",
    ) -> FetchedRecords:
        """Decoded records from `offset` on; per-partition problems in `error_code`,
        RiverlogError for a request wrong as a whole (negative sizes or wait)."""
        require(max_records >= 0, f"max_records must not be negative, got {max_records}")
        require(
            max_bytes >= 0,
            f"max_bytes must not be negative, got {max_bytes}",
            ErrorCode.INVALID_FETCH_SIZE,
        )
        options = FetchOptions(
            max_wait_ms=max_wait_ms,
            min_bytes=1,
            max_bytes=max_bytes or DEFAULT_MAX_BYTES,
            isolation_level=isolation_level,
            rack_id=rack_id,
        )
        [result] = await self.fetcher.fetch(
            ctx, options, [FetchPart(tp, offset, options.max_bytes)]
        )
        if result.error_code != ErrorCode.NONE:
            return FetchedRecords(
                result.error_code,
                result.error_message,
                high_watermark=result.high_watermark,
                log_start_offset=result.log_start_offset,
                next_offset=offset,
                last_stable_offset=result.last_stable_offset,
            )
        # read_committed: the leader stopped at the LSO; drop the aborted transactions' data.
        aborted = None
        if isolation_level == IsolationLevel.READ_COMMITTED:
            aborted = AbortedFilter(result.aborted_transactions)
        if record_loop.compiled():
            wire, next_offset, error = _encode_wire(result.records, offset, max_records, aborted)
            return FetchedRecords(
                int(error.code) if error else ErrorCode.NONE,
                error.message if error else "",
                (),
                result.high_watermark,
                result.log_start_offset,
                next_offset,
                wire,
                result.last_stable_offset,
            )
        if len(result.records) >= THREAD_THRESHOLD:
            decoded = await asyncio.to_thread(_decode, result.records, offset, max_records, aborted)
        else:
            decoded = _decode(result.records, offset, max_records, aborted)
        records, next_offset, error = decoded
        return FetchedRecords(
            int(error.code) if error else ErrorCode.NONE,
            error.message if error else "",
            records,
            result.high_watermark,
            result.log_start_offset,
            next_offset,
            last_stable_offset=result.last_stable_offset,
        )


def _codec(name: str) -> CompressionType:
    if not name:
        return CompressionType.NONE
    try:
        return CompressionType.from_name(name)
    except ValueError as exc:
        raise RiverlogError(str(exc), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE) from None


def _encode_all(
    groups: list[tuple[int, list[Record]]], codec: CompressionType, now_ms: int
) -> list[bytes]:
    return [_encode(records, codec, now_ms) for _, records in groups]


def _finish_all(groups: list[produce_wire.Group], codec: CompressionType) -> list[bytes]:
    """Each partition's batches (from C, `produce_wire.request_batches`) with their headers."""
    out = []
    for _, batches, _ in groups:
        whole = [
            finish_batch(records, n, base_ts, max_ts, compression=codec)
            for records, n, base_ts, max_ts in batches
        ]
        out.append(whole[0] if len(whole) == 1 else b"".join(whole))
    return out


_RECORD_OVERHEAD: Final = 24  # a record's bytes beyond key and value, at most, without headers


def _encode(records: Sequence[Record], codec: CompressionType, now_ms: int) -> bytes:
    """The records as back-to-back batches of about BATCH_SIZE bytes each: one batch encoded
    from columns (C-level loops, `encode_records`) when they fit in one, as they almost always
    do; otherwise record by record with `BatchBuilder`."""
    timestamps = [r.timestamp or now_ms for r in records]
    keys = [r.key for r in records]
    values = [r.value for r in records]
    headers = [encode_headers(r.headers) if r.headers else None for r in records]
    size = sum(map(len, filter(None, values))) + sum(map(len, filter(None, keys)))
    size += sum(map(len, filter(None, headers))) + _RECORD_OVERHEAD * len(records)
    if size <= BATCH_SIZE:
        try:
            encoded = encode_records(timestamps, keys, values, headers)
        except ValueError:  # a timestamp one batch cannot hold: the general path splits
            pass
        else:
            return finish_batch(
                encoded, len(records), timestamps[0], max(timestamps), compression=codec
            )
    out: list[bytes] = []
    builder = BatchBuilder(codec, batch_size=BATCH_SIZE)
    for record in records:
        timestamp = record.timestamp or now_ms
        if not builder.append(timestamp, record.key, record.value, record.headers):
            out.append(builder.build())
            builder = BatchBuilder(codec, batch_size=BATCH_SIZE)
            builder.append(timestamp, record.key, record.value, record.headers)
    out.append(builder.build())
    return out[0] if len(out) == 1 else b"".join(out)


def _encode_wire(
    data: bytes | memoryview, offset: int, max_records: int, aborted: AbortedFilter | None = None
) -> tuple[bytearray, int, RiverlogError | None]:
    """`_decode`'s answer with the records encoded for the wire in C (`records_wire`): no
    Python object per record, about a tenth of `_decode` plus the protobuf messages' cost."""
    try:
        wire, count, last = records_wire(data, offset, max_records, aborted=aborted)
    except InvalidBatchError as exc:
        wire, count, last = exc.partial  # type: ignore[attr-defined]
        error = RiverlogError(f"a fetched batch is corrupt: {exc}", ErrorCode.CORRUPT_MESSAGE)
        return wire, last + 1 if count else offset, error
    if max_records and count >= max_records:
        return wire, last + 1, None
    end = last + 1 if count else offset
    try:
        return wire, max(end, next_fetch_offset(data, offset)), None
    except InvalidBatchError:  # a torn tail after whole batches: fetch again from `end`
        return wire, end, None


def _decode(
    data: bytes | memoryview, offset: int, max_records: int, aborted: AbortedFilter | None = None
) -> tuple[list[Record], int, RiverlogError | None]:
    """Records at or past `offset` (at most `max_records`, 0: all), where to fetch next, and
    the corruption that stopped decoding, if any."""
    records: list[Record] = []
    error: RiverlogError | None = None
    try:
        for record in iter_batches_records(data, offset, aborted=aborted):
            records.append(record)
            if max_records and len(records) >= max_records:
                return records, record.offset + 1, None
    except InvalidBatchError as exc:
        error = RiverlogError(f"a fetched batch is corrupt: {exc}", ErrorCode.CORRUPT_MESSAGE)
    if error is not None:
        return records, records[-1].offset + 1 if records else offset, error
    last = records[-1].offset + 1 if records else offset
    try:
        return records, max(last, next_fetch_offset(data, offset)), None
    except InvalidBatchError:  # a torn tail after whole batches: fetch again from `last`
        return records, last, None
