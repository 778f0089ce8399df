"""Payloads for `bytes` fields: record batches a producer would send (built with the SDK's
BatchBuilder, every codec) and the ways they go wrong on the wire (a wrong CRC, cut short,
lengths and counts that lie, a bad magic, trailing garbage), plus plain garbage. The fuzzer puts
them in every bytes field, so record payloads, group metadata and assignments all see them.

Every choice comes from the `random.Random` passed in, so a seed reproduces the same bytes.
"""

from __future__ import annotations

import functools
import random
import struct
from collections.abc import Callable, Sequence

from riverlog.common.assignors.abstract import Assignment, Subscription
from riverlog.common.assignors.protocol import encode_assignment, encode_subscription
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.records.header import CRC_START, HEADER_SIZE, crc32c
from riverlog.common.types import TopicPartition

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")

# Byte positions of the header fields a corruption rewrites (see records/header.py).
_BASE_OFFSET = 0
_BATCH_LENGTH = 8
_LEADER_EPOCH = 12
_MAGIC = 16
_CRC = 17
_ATTRIBUTES = 21
_LAST_OFFSET_DELTA = 23
_BASE_TIMESTAMP = 27
_PRODUCER_ID = 43
_PRODUCER_EPOCH = 51
_BASE_SEQUENCE = 53
_RECORDS_COUNT = 57

ABSURD_INT32 = (-(2**31), -1, 0, 1, 2**31 - 1, 2**24, 61, 60, 49)
ABSURD_INT64 = (-(2**63), -1, 0, 2**63 - 1, 2**53)


def valid_batch(
    rng: random.Random,
    *,
    producer: tuple[int, int] | None = None,
    records: int | None = None,
) -> bytes:
    """One well-formed RecordBatch v2: 1..n records, random keys (some null), values, headers
    and codec; `producer` = (id, epoch) makes it an idempotent batch at a random sequence."""
    codec = rng.choice(list(CompressionType))
    builder = BatchBuilder(codec)
    if producer is not None:
        builder.producer_id, builder.producer_epoch = producer
        builder.base_sequence = rng.choice((0, 0, 1, 5, 2**31 - 1))
    count = records if records is not None else rng.choice((1, 1, 2, 3, 10, 100))
    base_ts = rng.choice((0, 1_700_000_000_000, 2**62, -1))
    for i in range(count):
        key = None if rng.random() < 0.3 else rng.randbytes(rng.choice((0, 1, 8, 64)))
        value = None if rng.random() < 0.1 else rng.randbytes(rng.choice((0, 1, 16, 512)))
        headers = [("h", b"v"), ("", None)] if rng.random() < 0.2 else []
        builder.append(base_ts + (i if base_ts >= 0 else 0), key, value, headers)
    return builder.build()


def _with(data: bytes, pos: int, packer: struct.Struct, value: int) -> bytes:
    out = bytearray(data)
    packer.pack_into(out, pos, value)
    return bytes(out)


def _recrc(data: bytes) -> bytes:
    """Recompute the CRC so a header lie reaches the checks behind the checksum."""
    return _with(data, _CRC, _U32, crc32c(data[CRC_START:]))


def wrong_crc(rng: random.Random, batch: bytes) -> bytes:
    crc = _U32.unpack_from(batch, _CRC)[0]
    return _with(batch, _CRC, _U32, crc ^ rng.choice((1, 0x80000000, 0xFFFFFFFF)))


def flipped_body_byte(rng: random.Random, batch: bytes) -> bytes:
    """A byte after the header changed, the CRC left as it was."""
    out = bytearray(batch)
    pos = rng.randrange(HEADER_SIZE, len(out)) if len(out) > HEADER_SIZE else len(out) - 1
    out[pos] ^= rng.randrange(1, 256)
    return bytes(out)


def truncated(rng: random.Random, batch: bytes) -> bytes:
    return batch[: rng.choice((1, 11, 12, 16, 17, 60, HEADER_SIZE, len(batch) - 1))]


def absurd_length(rng: random.Random, batch: bytes) -> bytes:
    return _with(batch, _BATCH_LENGTH, _I32, rng.choice(ABSURD_INT32))


def absurd_header_field(rng: random.Random, batch: bytes) -> bytes:
    """One header field set to a boundary value, CRC recomputed when it covers the field."""
    pos, packer, values = rng.choice(
        (
            (_RECORDS_COUNT, _I32, ABSURD_INT32),
            (_LAST_OFFSET_DELTA, _I32, ABSURD_INT32),
            (_BASE_OFFSET, _I64, ABSURD_INT64),
            (_LEADER_EPOCH, _I32, ABSURD_INT32),
            (_BASE_TIMESTAMP, _I64, ABSURD_INT64),
            (_PRODUCER_ID, _I64, ABSURD_INT64),
            (_PRODUCER_EPOCH, _I16, (-(2**15), -2, 2**15 - 1)),
            (_BASE_SEQUENCE, _I32, ABSURD_INT32),
            (_ATTRIBUTES, _I16, (0x07, 0x06, 0x20, 0x30, 0x40, -1, 0x7FFF)),
        )
    )
    data = _with(batch, pos, packer, rng.choice(values))
    return _recrc(data) if pos >= CRC_START and rng.random() < 0.8 else data


def bad_magic(rng: random.Random, batch: bytes) -> bytes:
    out = bytearray(batch)
    out[_MAGIC] = rng.choice((0, 1, 3, 255))
    return bytes(out)


def trailing_garbage(rng: random.Random, batch: bytes) -> bytes:
    return batch + rng.randbytes(rng.choice((1, 11, 12, 61, 200)))


def garbage_records(rng: random.Random, batch: bytes) -> bytes:
    """The header as built, the records replaced by garbage of the same length, and the CRC
    recomputed: only a look inside the records (decompressing them) can tell."""
    body = rng.randbytes(max(len(batch) - HEADER_SIZE, 1))
    return _recrc(batch[:HEADER_SIZE] + body)


def compression_bomb(rng: random.Random, batch: bytes) -> bytes:
    """A small batch whose one record inflates to 64 MiB (the batch itself is well formed)."""
    return _bomb(rng.choice((CompressionType.GZIP, CompressionType.ZSTD)))


@functools.cache
def _bomb(codec: CompressionType) -> bytes:
    builder = BatchBuilder(codec)
    builder.append(1_700_000_000_000, b"bomb", bytes(64 << 20))
    return builder.build()


def header_only(rng: random.Random, batch: bytes) -> bytes:
    """A 61-byte header that says it holds no records (length and count 0 or 1)."""
    data = _with(batch[:HEADER_SIZE], _BATCH_LENGTH, _I32, HEADER_SIZE - 12)
    return _recrc(_with(data, _RECORDS_COUNT, _I32, rng.choice((0, 1))))


CORRUPTIONS: Sequence[Callable[[random.Random, bytes], bytes]] = (
    wrong_crc,
    flipped_body_byte,
    truncated,
    absurd_length,
    absurd_header_field,
    absurd_header_field,
    bad_magic,
    trailing_garbage,
    header_only,
    garbage_records,
    garbage_records,
    compression_bomb,
)


def garbage(rng: random.Random, size_budget: int) -> bytes:
    size = rng.choice((0, 1, 2, 11, 12, 61, 62, 100, 4096, 70_000, 1 << 20))
    return rng.randbytes(min(size, max(size_budget, 0)))


def consumer_protocol(rng: random.Random, topics: Sequence[str]) -> bytes:
    """A well-formed ConsumerProtocol Subscription or Assignment (group metadata fields)."""
    names = list(rng.sample(list(topics), k=min(len(topics), rng.randrange(0, 3))))
    if rng.random() < 0.5:
        return encode_subscription(Subscription(names, rng.choice((None, b"", b"\x00"))))
    owned = [TopicPartition(n, rng.choice((0, 1, 2**31 - 1))) for n in names]
    return encode_assignment(Assignment(owned, rng.choice((None, b"x"))))


def batch_payload(
    rng: random.Random,
    size_budget: int,
    topics: Sequence[str],
    producers: Sequence[tuple[int, int]],
) -> bytes:
    """Bytes for any `bytes` field: batches (one or several, valid or broken), consumer
    protocol blobs, garbage, empty."""
    roll = rng.random()
    if roll < 0.08:
        return b""
    if roll < 0.25 or size_budget < 1024:
        return garbage(rng, size_budget)
    if roll < 0.32:
        return consumer_protocol(rng, topics)
    producer = rng.choice(producers) if producers and rng.random() < 0.3 else None
    batches = [valid_batch(rng, producer=producer) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
    if rng.random() < 0.6:
        i = rng.randrange(len(batches))
        batches[i] = rng.choice(CORRUPTIONS)(rng, batches[i])
    return b"".join(batches)
