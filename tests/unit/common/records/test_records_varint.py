"""Zigzag varints: Kafka's encodings of known values, the precomputed table, and bad input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from riverlog.common.records import InvalidBatchError
from riverlog.common.records.varint import (
    ENCODED,
    TWO_BYTE_LIMIT,
    decode_varint,
    encode_varint,
    encode_varint32,
    read_unsigned,
    size_of_varint,
    unzigzag,
    zigzag,
)

INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1

# Values and bytes as Kafka's ByteUtils.writeVarlong writes them (zigzag, then LEB128).
KNOWN = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-64, "7f"),
    (63, "7e"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (-8192, "ff7f"),
    (8192, "808001"),
    (300, "d804"),
    ((1 << 31) - 1, "feffffff0f"),
    (-(1 << 31), "ffffffff0f"),
    (INT64_MAX, "feffffffffffffffff01"),
    (INT64_MIN, "ffffffffffffffffff01"),
]


@pytest.mark.parametrize(("value", "hex_bytes"), KNOWN)
def test_known_encodings(value: int, hex_bytes: str) -> None:
    encoded = bytes.fromhex(hex_bytes)
    assert encode_varint(value) == encoded
    assert size_of_varint(value) == len(encoded)
    assert decode_varint(encoded + b"\xaa", 0) == (value, len(encoded))


def test_table_matches_the_general_encoder() -> None:
    assert len(ENCODED) == TWO_BYTE_LIMIT
    for z in range(TWO_BYTE_LIMIT):
        assert ENCODED[z] == encode_varint(unzigzag(z))
        assert len(ENCODED[z]) <= 2
    assert ENCODED[1] == b"\x01"  # a null length
    assert ENCODED[100 << 1] == bytes.fromhex("c801")  # length 100


@given(st.integers(min_value=INT64_MIN, max_value=INT64_MAX))
def test_round_trip_any_int64(value: int) -> None:
    encoded = encode_varint(value)
    assert len(encoded) == size_of_varint(value) <= 10
    assert decode_varint(b"\x00" + encoded, 1) == (value, 1 + len(encoded))
    assert unzigzag(zigzag(value)) == value
    assert zigzag(value) >= 0


def test_out_of_range_values_are_refused() -> None:
    with pytest.raises(ValueError, match="varlong"):
        encode_varint(INT64_MAX + 1)
    with pytest.raises(ValueError, match="varint"):
        encode_varint32(1 << 31)
    assert encode_varint32(-(1 << 31)) == bytes.fromhex("ffffffff0f")


@pytest.mark.parametrize(
    "data",
    [b"", b"\x80", b"\xff\xff", b"\x80" * 9],
    ids=["empty", "one-continuation", "two-continuations", "nine-continuations"],
)
def test_truncated_varint_raises_invalid_batch(data: bytes) -> None:
    with pytest.raises(InvalidBatchError, match="past the end"):
        read_unsigned(data, 0)


def test_overlong_varint_raises_invalid_batch() -> None:
    with pytest.raises(InvalidBatchError, match="longer than 10"):
        read_unsigned(b"\x80" * 10 + b"\x01", 0)
    with pytest.raises(InvalidBatchError, match="overflows 64 bits"):
        read_unsigned(b"\xff" * 9 + b"\x7f", 0)
