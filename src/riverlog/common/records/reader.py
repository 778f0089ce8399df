"""Decode RecordBatch v2 bytes, as a fetch returns them, into records: the consumer's hot loop.

Input is one or more whole batches back to back (header layout in `header.py`, record layout in
`record.py`), possibly followed by the first bytes of one more batch: a fetch response is cut at
`max_bytes` wherever it falls, so an incomplete trailing batch is ignored, as Kafka's consumer
ignores it. Anything else wrong (bad magic, a length below the header size, negative counts, CRC
mismatch, records that overrun their batch or leave bytes over, negative lengths inside a record,
a corrupt compressed stream) raises `InvalidBatchError`; no IndexError or struct.error leaks out.

Speed: one function, `_decode_into`, parses every record of a batch into parallel lists with all
names bound to locals, varints of one and two bytes decoded inline and only longer ones through
a call. `Record`s are then made in C with `map(tuple.__new__, zip(...))`; the columnar form skips
even that. Control batches (transaction markers) are skipped unless asked for; aborted
transactions are not filtered here (the read_committed consumer needs the fetch's aborted list).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from typing import Any, cast

from .compression import decompress
from .header import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidBatchError,
    parse_header,
    peek_size,
    validate_batch,
)
from .record import CREATE_TIME, LOG_APPEND_TIME, Header, Record
from .varint import read_unsigned

Buffer = bytes | bytearray | memoryview
_MIN_INT64 = -(1 << 63)
_SIGNED = tuple((z >> 1) ^ -(z & 1) for z in range(1 << 14))  # varints of <= 2 bytes

_make_record = cast(Callable[[tuple[Any, ...]], Record], partial(tuple.__new__, Record))


@dataclass(slots=True)
class RecordColumns:
    """Decoded records as parallel lists (row i of each list is one record), for Arrow.

    `next_offset` is where the next fetch starts: past the last complete batch read (control
    batches and batches wholly below `min_offset` included), and never below `min_offset`.
    """

    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    timestamp_types: list[int] = field(default_factory=list)
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    headers: list[list[Header]] = field(default_factory=list)
    next_offset: int = 0

    def __len__(self) -> int:
        return len(self.offsets)


def _check_header(data: bytes, pos: int) -> tuple[BatchHeader, int] | None:
    """The header and size of the complete batch at `pos`; None at the end or a torn tail."""
    if len(data) - pos < LOG_OVERHEAD:
        return None
    size = peek_size(data, pos)  # (its -1 for "too short" is ruled out above)
    if size < HEADER_SIZE:
        raise InvalidBatchError(f"batch length {size - LOG_OVERHEAD} at {pos} is below the header")
    if pos + size > len(data):
        return None
    header = parse_header(data, pos)
    if header.magic != MAGIC:
        raise InvalidBatchError(f"unsupported magic {header.magic} at {pos} (only 2)")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise InvalidBatchError(f"negative record count or offset delta in the batch at {pos}")
    return header, size


def _records_of(data: bytes, pos: int, size: int, header: BatchHeader) -> bytes:
    body = data[pos + HEADER_SIZE : pos + size]
    codec = header.attributes & COMPRESSION_MASK
    return decompress(codec, body) if codec else body


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


def _decode_into(
    recs: bytes, count: int, base_offset: int, base_ts: int, min_offset: int, out: RecordColumns
) -> int:
    """Append the records of one batch at or above `min_offset` to `out`; return how many."""
    read = read_unsigned
    signed = _SIGNED
    add_offset = out.offsets.append
    add_ts = out.timestamps.append
    add_key = out.keys.append
    add_value = out.values.append
    add_headers = out.headers.append
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
                headers: list[Header] = []
            else:
                headers, pos = _read_headers(recs, pos)
            if pos != end:
                raise InvalidBatchError(
                    f"record ending at {pos} of the records declared its end at {end}"
                )
            if offset >= min_offset:
                add_offset(offset)
                add_ts(ts)
                add_key(key)
                add_value(value)
                add_headers(headers)
                added += 1
    except IndexError:
        raise InvalidBatchError("records run past the end of their batch") from None
    if pos != len(recs):
        raise InvalidBatchError(f"{len(recs) - pos} bytes left after the last record of a batch")
    return added


def _as_bytes(data: Buffer) -> bytes:
    return data if type(data) is bytes else bytes(data)


def _decode_batches(
    data: bytes,
    min_offset: int,
    validate_crc: bool,
    include_control: bool,
    out: RecordColumns,
) -> Iterator[tuple[BatchHeader, int]]:
    """Decode batch after batch into `out`, yielding each decoded batch's header and how many
    records it added; `out.next_offset` follows the batches read."""
    pos = 0
    out.next_offset = min_offset
    while True:
        found = _check_header(data, pos)
        if found is None:
            return
        header, size = found
        next_offset = header.base_offset + header.last_offset_delta + 1
        if next_offset > min_offset and (include_control or not header.attributes & CONTROL_MASK):
            if validate_crc:
                validate_batch(data, pos)
            recs = _records_of(data, pos, size, header)
            start = len(out.timestamps)
            added = _decode_into(
                recs, header.records_count, header.base_offset, header.base_timestamp,
                min_offset, out,
            )  # fmt: skip
            if header.attributes & TIMESTAMP_TYPE_MASK:
                out.timestamps[start:] = [header.max_timestamp] * added
            yield header, added
        if next_offset > out.next_offset:
            out.next_offset = next_offset
        pos += size


def iter_batches_records(
    data: Buffer,
    min_offset: int = 0,
    *,
    validate_crc: bool = True,
    include_control: bool = False,
) -> Iterator[Record]:
    """The records of every complete batch in `data` with offset >= `min_offset`, in order.

    An incomplete trailing batch is ignored. Control batches are skipped unless
    `include_control`. Raises InvalidBatchError on a corrupt batch (records of the batches
    before it have been yielded by then).
    """
    out = RecordColumns()
    for header, added in _decode_batches(
        _as_bytes(data), min_offset, validate_crc, include_control, out
    ):
        if not added:
            continue
        ts_type = LOG_APPEND_TIME if header.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME
        yield from map(
            _make_record,
            zip(out.offsets, out.timestamps, out.keys, out.values, out.headers, repeat(ts_type)),
        )
        out.offsets.clear()
        out.timestamps.clear()
        out.keys.clear()
        out.values.clear()
        out.headers.clear()


def decode_columns(
    data: Buffer,
    min_offset: int = 0,
    *,
    validate_crc: bool = True,
    include_control: bool = False,
) -> RecordColumns:
    """Like `iter_batches_records`, but all records at once as parallel lists."""
    out = RecordColumns()
    types = out.timestamp_types
    for header, added in _decode_batches(
        _as_bytes(data), min_offset, validate_crc, include_control, out
    ):
        ts_type = LOG_APPEND_TIME if header.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME
        types += repeat(ts_type, added)
    return out


def iter_record_timestamps(
    batch: Buffer, pos: int = 0, *, validate_crc: bool = True
) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of every record of the ONE batch at `pos` (bytes after it ignored).

    For ListOffsets by timestamp on a storage node. Control batches are read too. Raises
    InvalidBatchError if the batch is corrupt or incomplete.
    """
    data = _as_bytes(batch)
    found = _check_header(data, pos)
    if found is None:
        raise InvalidBatchError(f"incomplete batch at {pos}")
    header, size = found
    if validate_crc:
        validate_batch(data, pos)
    out = RecordColumns()
    recs = _records_of(data, pos, size, header)
    _decode_into(
        recs, header.records_count, header.base_offset, header.base_timestamp, _MIN_INT64, out
    )
    if header.attributes & TIMESTAMP_TYPE_MASK:
        return zip(out.offsets, repeat(header.max_timestamp))
    return zip(out.offsets, out.timestamps, strict=True)


def next_fetch_offset(data: Buffer, position: int = 0) -> int:
    """The offset after the last complete batch in `data`, at least `position`: where a consumer
    that fetched from `position` fetches next. Reads headers only (no CRC check)."""
    buf = _as_bytes(data)
    pos = 0
    result = position
    while True:
        found = _check_header(buf, pos)
        if found is None:
            return result
        header, size = found
        result = max(result, header.base_offset + header.last_offset_delta + 1)
        pos += size
