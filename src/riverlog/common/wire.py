"""Protobuf's wire format, by hand: a varint read and written, a field's value skipped.

The one walker behind the parses that read a message's bytes without protobuf's (the gateway's
`produce_request_parse` and its ProduceRecords count, the SDK's FetchStream answers) and the
encoders that splice bytes into a message (`zerocopy`, the gateway's fetch answers). Malformed
bytes raise `WireError` (a ValueError), which each caller turns into its own refusal.
"""

from __future__ import annotations

from typing import Final

U64: Final = (1 << 64) - 1
MAX_VARINT_BYTES: Final = 10

VARINT: Final = 0
FIXED64: Final = 1
LENGTH_DELIMITED: Final = 2
FIXED32: Final = 5


class WireError(ValueError):
    """Bytes that are not protobuf's wire format where they were read."""


def read_varint(data: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    """The unsigned varint at `pos` (of at most 10 bytes, before `end`), kept to 64 bits as
    protobuf does, and the position after it."""
    value = 0
    shift = 0
    start = pos
    while pos < end:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value & U64 if shift == 63 else value), pos  # a tenth byte may overflow
        shift += 7
        if shift == 70:  # ten bytes read
            break
    raise WireError(f"truncated or overlong varint at byte {start}")


def skip_field(data: bytes | memoryview, pos: int, end: int, wire_type: int) -> int:
    """The position past the value, starting at `pos`, of a field of `wire_type`."""
    if wire_type == VARINT:
        return read_varint(data, pos, end)[1]
    if wire_type == LENGTH_DELIMITED:
        size, pos = read_varint(data, pos, end)
        pos += size
    elif wire_type == FIXED64:
        pos += 8
    elif wire_type == FIXED32:
        pos += 4
    else:
        raise WireError(f"unsupported wire type {wire_type}")
    if pos > end:
        raise WireError("truncated field value")
    return pos


def encode_varint(value: int) -> bytes:
    """`value` as a varint; a negative int32/int64 as its 64-bit two's complement (10 bytes)."""
    value &= U64
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
