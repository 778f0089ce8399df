"""Zigzag varints, the integer encoding inside every record of a RecordBatch v2.

Layout (Protocol Buffers' encoding, as Kafka's `ByteUtils.writeVarint`/`writeVarlong`): a signed
value v is first zigzagged, z = (v << 1) ^ (v >> 63), so small magnitudes of either sign become
small unsigned numbers (0→0, -1→1, 1→2, -2→3 ...), then z is written 7 bits at a time, least
significant group first, with bit 7 set on every byte except the last:

    value   zigzag  bytes
    0       0       00
    -1      1       01
    1       2       02
    63      126     7e
    64      128     80 01
    -8192   16383   ff 7f
    8192    16384   80 80 01

A varint (int32) takes at most 5 bytes, a varlong (int64) at most 10. The encoder and the batch
codec's hot loops use `ENCODED`, every encoding of up to two bytes precomputed, so the common
case (lengths and deltas below 8192) is one tuple lookup instead of a loop; everything else goes
through the general functions here, which also do the range and overflow checks.
"""

from __future__ import annotations

from typing import Final

from .header import InvalidBatchError

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1
_MAX_VARLONG_BYTES: Final = 10

TWO_BYTE_LIMIT: Final = 1 << 14
"""Zigzag values below this encode in at most two bytes (signed values -8192..8191)."""


def _encode_unsigned(z: int) -> bytes:
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


ENCODED: Final[tuple[bytes, ...]] = tuple(_encode_unsigned(z) for z in range(TWO_BYTE_LIMIT))
"""ENCODED[z] is the varint bytes of the zigzag value z, for z < TWO_BYTE_LIMIT. A length n
(never negative) encodes as ENCODED[n << 1]; -1 (a null length) as ENCODED[1] == b"\\x01"."""


def zigzag(value: int) -> int:
    """The zigzag mapping of a signed 64-bit value (0, -1, 1, -2 ... → 0, 1, 2, 3 ...)."""
    return (value << 1) ^ (value >> 63)


def unzigzag(z: int) -> int:
    """The inverse of `zigzag`."""
    return (z >> 1) ^ -(z & 1)


def encode_varint(value: int) -> bytes:
    """A signed value as a zigzag varlong (Kafka writes int32 varints the same way)."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} does not fit a varlong (signed 64 bits)")
    z = (value << 1) ^ (value >> 63)
    if z < TWO_BYTE_LIMIT:
        return ENCODED[z]
    return _encode_unsigned(z)


def encode_varint32(value: int) -> bytes:
    """A signed value as a zigzag varint, checked against the int32 range Kafka's reader allows."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"{value} does not fit a varint (signed 32 bits)")
    return encode_varint(value)


def size_of_varint(value: int) -> int:
    """Bytes the zigzag varint of `value` takes."""
    z = (value << 1) ^ (value >> 63)
    size = 1
    while z >= 0x80:
        z >>= 7
        size += 1
    return size


def read_unsigned(buf: bytes, pos: int) -> tuple[int, int]:
    """The raw (still zigzagged) varint at `pos` and the position after it.

    Raises InvalidBatchError when the buffer ends inside the varint or the varint is longer than
    the 10 bytes of a varlong; never IndexError.
    """
    z = 0
    shift = 0
    end = len(buf)
    start = pos
    while True:
        if pos >= end:
            raise InvalidBatchError(f"varint at {start} runs past the end of the records")
        b = buf[pos]
        pos += 1
        z |= (b & 0x7F) << shift
        if b < 0x80:
            if z >> 64:
                raise InvalidBatchError(f"varint at {start} overflows 64 bits")
            return z, pos
        shift += 7
        if pos - start >= _MAX_VARLONG_BYTES:
            raise InvalidBatchError(f"varint at {start} is longer than {_MAX_VARLONG_BYTES} bytes")


def decode_varint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    """The signed value of the zigzag varint at `pos` and the position after it."""
    z, pos = read_unsigned(buf, pos)
    return (z >> 1) ^ -(z & 1), pos
