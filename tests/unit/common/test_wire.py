"""`common.wire`, the one protobuf wire walker: varints read as protobuf writes them (negative
ints as 10 bytes, kept to 64 bits), fields of every wire type skipped, malformed bytes refused
with WireError."""

from __future__ import annotations

import pytest
from google.protobuf.internal.decoder import _DecodeVarint  # type: ignore[attr-defined]
from google.protobuf.internal.encoder import _VarintBytes  # type: ignore[attr-defined]

from riverlog.common.wire import WireError, encode_varint, read_varint, skip_field

pytestmark = pytest.mark.timeout(30)

VALUES = [0, 1, 127, 128, 300, 2**31 - 1, 2**32, 2**63 - 1, 2**64 - 1]


@pytest.mark.parametrize("value", VALUES)
def test_varints_are_protobufs(value: int) -> None:
    data = encode_varint(value)
    assert data == _VarintBytes(value)
    assert read_varint(b"\x00" + data + b"\x00", 1, len(data) + 2) == (value, len(data) + 1)
    assert _DecodeVarint(data, 0) == (value, len(data))


def test_a_negative_int_is_ten_bytes_and_reads_back_as_its_64_bit_complement() -> None:
    data = encode_varint(-1)
    assert len(data) == 10 and read_varint(data, 0, 10) == (2**64 - 1, 10)
    assert read_varint(b"\xff" * 9 + b"\x7f", 0, 10) == (2**64 - 1, 10)  # overflow dropped


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff" * 10 + b"\x01", b"\x96\x01"[:1]])
def test_truncated_or_overlong_varints_are_refused(data: bytes) -> None:
    with pytest.raises(WireError, match="truncated or overlong varint"):
        read_varint(data, 0, len(data))


def test_a_varint_stops_at_end_not_at_the_buffer() -> None:
    with pytest.raises(WireError):
        read_varint(b"\x96\x01", 0, 1)


@pytest.mark.parametrize(
    ("wire_type", "value"),
    [(0, b"\x96\x01"), (1, b"\x00" * 8), (2, b"\x03abc"), (5, b"\x00" * 4)],
)
def test_each_wire_type_is_skipped(wire_type: int, value: bytes) -> None:
    data = value + b"\x08"
    assert skip_field(data, 0, len(data), wire_type) == len(value)
    with pytest.raises(WireError):
        skip_field(value[:-1], 0, len(value) - 1, wire_type)


@pytest.mark.parametrize("wire_type", [3, 4, 6, 7])
def test_groups_and_unknown_wire_types_are_refused(wire_type: int) -> None:
    with pytest.raises(WireError, match="unsupported wire type"):
        skip_field(b"\x00" * 8, 0, 8, wire_type)
