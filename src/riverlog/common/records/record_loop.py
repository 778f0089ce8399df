"""The record loop of the RecordBatch v2 reader: the records of one batch (after its header,
decompressed) into parallel lists, or into the consumer's record tuples.

Two implementations with the same fields, checks and error messages: the C extension
`_speedups` (decision 0016), built by `pip install` where a C compiler is present (setup.py marks
it optional), and `decode_into_py`, the pure-Python loop used without it: all names bound to
locals, varints of one and two bytes decoded inline, only longer ones through a call. The unit
tests of `records/` run under both (their conftest swaps `decode_into` and `_speedups`).
"""

from __future__ import annotations

from typing import Any

from .header import InvalidBatchError
from .record import Header
from .varint import read_unsigned

try:
    from . import _speedups
except ImportError:  # built without a C compiler: the pure-Python loop
    _speedups = None  # type: ignore[assignment]

_SIGNED = tuple((z >> 1) ^ -(z & 1) for z in range(1 << 14))  # varints of <= 2 bytes


def compiled() -> bool:
    """True when the C loop is in use."""
    return _speedups is not None


def _read_headers(recs: bytes, pos: int) -> tuple[list[Header], int]:
    count, pos = read_unsigned(recs, pos)
    if count & 1:
        raise InvalidBatchError("negative header count")
    headers: list[Header] = []
    for _ in range(count >> 1):
        z, pos = read_unsigned(recs, pos)
        if z & 1:
            raise InvalidBatchError("negative header key length")
        end = pos + (z >> 1)
        if end > len(recs):
            raise InvalidBatchError("header key runs past the end of the records")
        try:
            key = recs[pos:end].decode("utf-8")
        except UnicodeDecodeError as e:
            raise InvalidBatchError(f"header key is not UTF-8: {e}") from None
        z, pos = read_unsigned(recs, end)
        if z == 1:
            headers.append((key, None))
            continue
        if z & 1:
            raise InvalidBatchError("negative header value length")
        end = pos + (z >> 1)
        if end > len(recs):
            raise InvalidBatchError("header value runs past the end of the records")
        headers.append((key, recs[pos:end]))
        pos = end
    return headers, pos


def decode_into_py(
    buf: bytes,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    min_offset: int,
    offsets: list[int],
    timestamps: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
    headers: list[list[Header]],
) -> int:
    """Append the records of one batch (`buf[start:end]`) at or above `min_offset` to the
    five lists; return how many."""
    recs = buf if start == 0 and end == len(buf) else buf[start:end]
    read = read_unsigned
    signed = _SIGNED
    add_offset = offsets.append
    add_ts = timestamps.append
    add_key = keys.append
    add_value = values.append
    add_headers = headers.append
    added = 0
    pos = 0
    try:
        for _ in range(count):
            z = recs[pos]  # length
            if z < 0x80:
                pos += 1
            elif (b := recs[pos + 1]) < 0x80:
                z = (z & 0x7F) | (b << 7)
                pos += 2
            else:
                z, pos = read(recs, pos)
            if z & 1:
                raise InvalidBatchError(f"negative record length at {pos} of the records")
            end = pos + (z >> 1)
            z = recs[pos + 1]  # after the attributes byte: timestampDelta
            if z < 0x80:
                ts = base_ts + signed[z]
                pos += 2
            elif (b := recs[pos + 2]) < 0x80:
                ts = base_ts + signed[(z & 0x7F) | (b << 7)]
                pos += 3
            else:
                z, pos = read(recs, pos + 1)
                ts = base_ts + ((z >> 1) ^ -(z & 1))
            z = recs[pos]  # offsetDelta
            if z < 0x80:
                offset = base_offset + signed[z]
                pos += 1
            elif (b := recs[pos + 1]) < 0x80:
                offset = base_offset + signed[(z & 0x7F) | (b << 7)]
                pos += 2
            else:
                z, pos = read(recs, pos)
                offset = base_offset + ((z >> 1) ^ -(z & 1))
            z = recs[pos]  # keyLength
            if z < 0x80:
                pos += 1
            elif (b := recs[pos + 1]) < 0x80:
                z = (z & 0x7F) | (b << 7)
                pos += 2
            else:
                z, pos = read(recs, pos)
            if z & 1:
                if z != 1:
                    raise InvalidBatchError(f"negative key length at {pos} of the records")
                key = None
            else:
                z = pos + (z >> 1)
                key = recs[pos:z]
                pos = z
            z = recs[pos]  # valueLength
            if z < 0x80:
                pos += 1
            elif (b := recs[pos + 1]) < 0x80:
                z = (z & 0x7F) | (b << 7)
                pos += 2
            else:
                z, pos = read(recs, pos)
            if z & 1:
                if z != 1:
                    raise InvalidBatchError(f"negative value length at {pos} of the records")
                value = None
            else:
                z = pos + (z >> 1)
                value = recs[pos:z]
                pos = z
            if recs[pos] == 0:  # no headers, the common case
                pos += 1
                hdrs: list[Header] = []
            else:
                hdrs, pos = _read_headers(recs, pos)
            if pos != end:
                raise InvalidBatchError(
                    f"record ending at {pos} of the records declared its end at {end}"
                )
            if offset >= min_offset:
                add_offset(offset)
                add_ts(ts)
                add_key(key)
                add_value(value)
                add_headers(hdrs)
                added += 1
    except IndexError:
        raise InvalidBatchError("records run past the end of their batch") from None
    if pos != len(recs):
        raise InvalidBatchError(f"{len(recs) - pos} bytes left after the last record of a batch")
    return added


def _decode_into_c(
    buf: bytes,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    min_offset: int,
    offsets: list[int],
    timestamps: list[int],
    keys: list[bytes | None],
    values: list[bytes | None],
    headers: list[list[Header]],
) -> int:
    """`decode_into_py` in C."""
    try:
        return _speedups.decode_into(
            buf, start, end, count, base_offset, base_ts, min_offset,
            offsets, timestamps, keys, values, headers,
        )  # fmt: skip
    except ValueError as e:
        raise InvalidBatchError(str(e)) from None


decode_into = decode_into_py if _speedups is None else _decode_into_c


def rows_into(
    buf: bytes | bytearray,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    min_offset: int,
    row_type: type[Any],
    topic: str,
    partition: int,
    ts_type: int,
    fixed_ts: int | None,
    out: list[Any],
) -> int:
    """Append row_type(topic, partition, offset, timestamp, ts_type, key, value, headers) for
    each record at or above `min_offset` (timestamps replaced by `fixed_ts` unless None); C
    only (callers check `compiled()`)."""
    try:
        return _speedups.rows_into(
            buf, start, end, count, base_offset, base_ts, min_offset,
            row_type, topic, partition, ts_type, fixed_ts, out,
        )  # fmt: skip
    except ValueError as e:
        raise InvalidBatchError(str(e)) from None


def wire_into(
    buf: bytes | bytearray,
    start: int,
    end: int,
    count: int,
    base_offset: int,
    base_ts: int,
    min_offset: int,
    ts_type: int,
    fixed_ts: int | None,
    limit: int,
    out: bytearray,
) -> tuple[int, int]:
    """Append each record at or above `min_offset` (at most `limit`, 0: all) to `out` as a
    protobuf `riverlog.v1.Record` in field 3 (FetchRecordsResponse.records); returns how many
    and the last one's offset (-1: none). C only (callers check `compiled()`)."""
    try:
        added, last = _speedups.wire_into(
            buf, start, end, count, base_offset, base_ts, min_offset, ts_type, fixed_ts,
            limit, out,
        )  # fmt: skip
    except ValueError as e:
        raise InvalidBatchError(str(e)) from None
    return int(added), int(last)
