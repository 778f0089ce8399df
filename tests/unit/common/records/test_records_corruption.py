"""Corrupt input of every kind raises InvalidBatchError: never IndexError, struct.error or a
codec's own exception, and never a hang. Record-level damage is tested behind a valid CRC
(the batch re-framed around crafted records), so the record parser itself is what catches it."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from riverlog.common.records import (
    BatchBuilder,
    CompressionType,
    InvalidBatchError,
    decode_columns,
    iter_batches_records,
    iter_record_timestamps,
)
from riverlog.common.records.header import crc32c

TS = 1_700_000_000_000


def valid_batch(codec: CompressionType = CompressionType.NONE) -> bytes:
    builder = BatchBuilder(codec)
    builder.append(TS, b"key", b"value", [("h", b"x")])
    builder.append(TS + 1, None, b"v" * 200)
    builder.append(TS - 1, b"k", None)
    return builder.build()


def reframe(records: bytes, count: int, attributes: int = 0) -> bytes:
    """A batch with a valid header and CRC around arbitrary record bytes."""
    batch = bytearray(valid_batch()[:61] + records)
    struct.pack_into(">i", batch, 8, len(batch) - 12)  # batchLength
    struct.pack_into(">h", batch, 21, attributes)
    struct.pack_into(">i", batch, 57, count)  # recordsCount
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return bytes(batch)


def read_all(data: bytes, validate_crc: bool = True) -> None:
    list(iter_batches_records(data, validate_crc=validate_crc))


# One good record: length 8 | attributes 0 | tsDelta 0 | offsetDelta 0 | key "k" | value "v" |
# no headers.
GOOD = bytes.fromhex("1000000002") + b"k" + b"\x02" + b"v" + b"\x00"


def test_the_crafted_record_is_valid() -> None:
    (record,) = iter_batches_records(reframe(GOOD, 1))
    assert (record.key, record.value, record.headers) == (b"k", b"v", [])


RECORD_DAMAGE = {
    "negative record length": (bytes.fromhex("0f000000") + GOOD[4:], 1, "negative record length"),
    "negative key length": (bytes.fromhex("10000000") + b"\x03k\x02v\x00", 1, "negative key"),
    "negative value length": (bytes.fromhex("10000000") + b"\x02k\x09v\x00", 1, "negative value"),
    "negative header count": (bytes.fromhex("10000000") + b"\x02k\x02v\x01", 1, "header count"),
    "negative header key length": (
        bytes.fromhex("16000000") + b"\x02k\x02v\x02\x03a\x02b",
        1,
        "header key length",
    ),
    "header key not utf-8": (
        bytes.fromhex("16000000") + b"\x02k\x02v\x02\x02\xff\x02b",
        1,
        "UTF-8",
    ),
    "huge key length": (
        bytes.fromhex("10000000") + b"\x80\x80\x80\x80\x08" + b"k\x02v\x00",
        1,
        r"past the end|declared its end",
    ),
    "huge header value length": (
        bytes.fromhex("16000000") + b"\x02k\x02v\x02\x02a\xfe\xff\xff\xff\x0fb",
        1,
        "header value runs past",
    ),
    "record shorter than declared": (bytes.fromhex("28") + GOOD[1:], 1, "declared its end"),
    "record longer than declared": (bytes.fromhex("0e") + GOOD[1:], 1, "declared its end"),
    "fewer records than counted": (GOOD, 2, "past the end"),
    "more records than counted": (GOOD + GOOD, 1, "bytes left after the last record"),
    "absurd record count": (GOOD, (1 << 31) - 1, "past the end"),
    "truncated varint": (GOOD[:-1] + b"\x80", 1, "past the end"),
    "overlong varint": (b"\xff" * 11 + GOOD, 1, "longer than 10 bytes"),
    "empty records": (b"", 1, "past the end"),
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("records", "count", "message"), RECORD_DAMAGE.values(), ids=RECORD_DAMAGE)
def test_record_damage_behind_a_valid_crc(records: bytes, count: int, message: str) -> None:
    batch = reframe(records, count)
    with pytest.raises(InvalidBatchError, match=message):
        read_all(batch)
    with pytest.raises(InvalidBatchError, match=message):
        decode_columns(batch)
    with pytest.raises(InvalidBatchError, match=message):
        list(iter_record_timestamps(batch))


def test_crc_mismatch() -> None:
    batch = bytearray(valid_batch())
    batch[70] ^= 0x01
    with pytest.raises(InvalidBatchError, match="CRC mismatch"):
        read_all(bytes(batch))
    with pytest.raises(InvalidBatchError, match="CRC mismatch"):
        list(iter_record_timestamps(bytes(batch)))


def test_crc_mismatch_is_ignored_when_not_validating() -> None:
    batch = bytearray(valid_batch())
    batch[17] ^= 0xFF  # the stored CRC itself
    assert len(list(iter_batches_records(bytes(batch), validate_crc=False))) == 3


def test_bad_magic() -> None:
    batch = bytearray(valid_batch())
    batch[16] = 1
    with pytest.raises(InvalidBatchError, match="magic 1"):
        read_all(bytes(batch), validate_crc=False)


@pytest.mark.parametrize("length", [-1, -(1 << 31), 0, 48], ids=["minus-1", "int-min", "0", "48"])
def test_batch_length_below_the_header(length: int) -> None:
    batch = bytearray(valid_batch())
    struct.pack_into(">i", batch, 8, length)
    with pytest.raises(InvalidBatchError, match="below the header"):
        read_all(bytes(batch))


def test_huge_declared_batch_length() -> None:
    good = valid_batch()
    batch = bytearray(good)
    struct.pack_into(">i", batch, 8, (1 << 31) - 1)
    # Last in a fetch response it is a torn tail: ignored, the batches before it still read.
    assert len(list(iter_batches_records(good + bytes(batch)))) == 3
    # Read as the one batch of a ListOffsets lookup it is an error.
    with pytest.raises(InvalidBatchError, match="incomplete batch"):
        list(iter_record_timestamps(bytes(batch)))


def test_negative_record_count_and_offset_delta() -> None:
    for offset, fmt in ((57, ">i"), (23, ">i")):
        batch = bytearray(valid_batch())
        struct.pack_into(fmt, batch, offset, -3)
        with pytest.raises(InvalidBatchError, match="negative record count"):
            read_all(bytes(batch), validate_crc=False)


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_corrupt_compressed_records_behind_a_valid_crc(codec: int) -> None:
    with pytest.raises(InvalidBatchError, match=r"corrupt|truncated|overruns"):
        read_all(reframe(b"\x00\x01\x02 not a compressed stream at all", 1, codec))


def test_unknown_codec_id() -> None:
    with pytest.raises(InvalidBatchError, match="unknown compression type id 6"):
        read_all(reframe(GOOD, 1, attributes=6))


def test_corruption_after_good_batches_yields_those_first() -> None:
    bad = bytearray(valid_batch())
    bad[16] = 0
    seen = []
    with pytest.raises(InvalidBatchError):
        for record in iter_batches_records(valid_batch() + bytes(bad)):
            seen.append(record.offset)
    assert seen == [0, 1, 2]


@pytest.mark.timeout(60)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(list(CompressionType)),
    edits=st.lists(
        st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(0, 255)), max_size=6
    ),
    cut=st.integers(min_value=0, max_value=10_000),
)
def test_random_damage_only_ever_raises_invalid_batch(
    codec: CompressionType, edits: list[tuple[int, int]], cut: int
) -> None:
    batch = bytearray(valid_batch(codec))
    for where, byte in edits:
        batch[where % len(batch)] = byte
    data = bytes(batch[: max(cut, 12)])
    for validate in (False, True):
        try:
            read_all(data, validate_crc=validate)
            decode_columns(data, validate_crc=validate)
        except InvalidBatchError:
            pass
        try:
            list(iter_record_timestamps(data, validate_crc=validate))
        except InvalidBatchError:
            pass
