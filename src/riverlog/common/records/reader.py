"""Decode RecordBatch v2 bytes, as a fetch returns them, into records: the consumer's hot loop.

Input is one or more whole batches back to back (header layout in `header.py`, record layout in
`record.py`), possibly followed by the first bytes of one more batch: a fetch response is cut at
`max_bytes` wherever it falls, so an incomplete trailing batch is ignored, as Kafka's consumer
ignores it. Anything else wrong (bad magic, a length below the header size, negative counts, CRC
mismatch, records that overrun their batch or leave bytes over, negative lengths inside a record,
a corrupt compressed stream) raises `InvalidBatchError`; no IndexError or struct.error leaks out.

Speed: `record_loop` parses every record of a batch into parallel lists, in C when the optional
extension was built (decision 0016), else in Python. `Record`s are then made in C with
`map(tuple.__new__, zip(...))`; the columnar form skips even that, and `decode_rows` builds the
consumer's record tuples straight from the bytes. An uncompressed batch's records are read
where they lie in the fetched bytes (no copy). Control batches
(transaction markers) are skipped unless asked for. A read_committed reader passes an
`AbortedFilter` built from the fetch's aborted transactions (`aborted.py`), and the batches of
aborted transactions are skipped too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from typing import TYPE_CHECKING, Any, TypeVar, cast, overload

from . import record_loop
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

if TYPE_CHECKING:
    from .aborted import AbortedFilter

Buffer = bytes | bytearray | memoryview
_MIN_INT64 = -(1 << 63)

_Row = TypeVar("_Row", bound=tuple[Any, ...])
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

    def lists(
        self,
    ) -> tuple[list[int], list[int], list[bytes | None], list[bytes | None], list[list[Header]]]:
        """The five lists the record loop appends to."""
        return self.offsets, self.timestamps, self.keys, self.values, self.headers


def _check_header(data: bytes | bytearray, pos: int, end: int) -> tuple[BatchHeader, int] | None:
    """The header and size of the complete batch at `pos`, which ends by `end`; None at the
    end or a torn tail."""
    if end - pos < LOG_OVERHEAD:
        return None
    size = peek_size(data, pos)  # (its -1 for "too short" is ruled out above)
    if size < HEADER_SIZE:
        raise InvalidBatchError(f"batch length {size - LOG_OVERHEAD} at {pos} is below the header")
    if pos + size > end:
        return None
    header = parse_header(data, pos)
    if header.magic != MAGIC:
        raise InvalidBatchError(f"unsupported magic {header.magic} at {pos} (only 2)")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise InvalidBatchError(f"negative record count or offset delta in the batch at {pos}")
    return header, size


@overload
def _records_of(
    data: bytes, pos: int, size: int, header: BatchHeader
) -> tuple[bytes, int, int]: ...
@overload
def _records_of(
    data: bytes | bytearray, pos: int, size: int, header: BatchHeader
) -> tuple[bytes | bytearray, int, int]: ...
def _records_of(
    data: bytes | bytearray, pos: int, size: int, header: BatchHeader
) -> tuple[bytes | bytearray, int, int]:
    """The batch's records as (buffer, start, end): in place, or decompressed."""
    codec = header.attributes & COMPRESSION_MASK
    if not codec:
        return data, pos + HEADER_SIZE, pos + size
    body = data[pos + HEADER_SIZE : pos + size]
    recs = decompress(codec, body if type(body) is bytes else bytes(body))
    return recs, 0, len(recs)


def _as_bytes(data: Buffer) -> bytes:
    return data if type(data) is bytes else bytes(data)


def _in_place(data: Buffer) -> bytes | bytearray:
    """`data` as the C record loop and the header reads take it: bytes or a bytearray as they
    are (the consumer's direct fetch reads its answers into a bytearray, decision 0047), a
    memoryview copied."""
    return data if type(data) is bytes or type(data) is bytearray else bytes(data)


def _span(data: bytes | bytearray, start: int, end: int | None) -> int:
    """The end of the range [start, end) of `data` (None: the end of `data`), checked."""
    stop = len(data) if end is None else end
    if not 0 <= start <= stop <= len(data):
        raise ValueError(f"bad range [{start}, {end}) of {len(data)} bytes")
    return stop


def _decode_batches(
    data: bytes,
    min_offset: int,
    validate_crc: bool,
    include_control: bool,
    out: RecordColumns,
    aborted: AbortedFilter | None = None,
    start: int = 0,
    end: int | None = None,
) -> Iterator[tuple[BatchHeader, int]]:
    """Decode batch after batch of data[start:end] into `out`, yielding each decoded batch's
    header and how many records it added; `out.next_offset` follows the batches read. With
    `aborted`, the batches it drops (control batches among them) are not decoded."""
    stop = _span(data, start, end)
    pos = start
    out.next_offset = min_offset
    while True:
        found = _check_header(data, pos, stop)
        if found is None:
            return
        header, size = found
        next_offset = header.base_offset + header.last_offset_delta + 1
        if aborted is not None and aborted and aborted.drops(header, data, pos):
            pass
        elif next_offset > min_offset and (include_control or not header.attributes & CONTROL_MASK):
            if validate_crc:
                validate_batch(data, pos)
            recs, rstart, rend = _records_of(data, pos, size, header)
            start = len(out.timestamps)
            added = record_loop.decode_into(
                recs, rstart, rend, header.records_count, header.base_offset,
                header.base_timestamp, min_offset, *out.lists(),
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
    aborted: AbortedFilter | None = None,
) -> Iterator[Record]:
    """The records of every complete batch in `data` with offset >= `min_offset`, in order.

    An incomplete trailing batch is ignored. Control batches are skipped unless
    `include_control`, and aborted transactions' batches when `aborted` is given. Raises
    InvalidBatchError on a corrupt batch (records of the batches before it have been yielded
    by then).
    """
    out = RecordColumns()
    for header, added in _decode_batches(
        _as_bytes(data), min_offset, validate_crc, include_control, out, aborted
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
    aborted: AbortedFilter | None = None,
    start: int = 0,
    end: int | None = None,
) -> RecordColumns:
    """Like `iter_batches_records`, but all records at once as parallel lists; of the batches
    in data[start:end] (read in place)."""
    out = RecordColumns()
    types = out.timestamp_types
    for header, added in _decode_batches(
        _as_bytes(data), min_offset, validate_crc, include_control, out, aborted, start, end
    ):
        ts_type = LOG_APPEND_TIME if header.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME
        types += repeat(ts_type, added)
    return out


def decode_rows(
    data: Buffer,
    min_offset: int,
    row_type: type[_Row],
    topic: str,
    partition: int,
    *,
    validate_crc: bool = True,
    aborted: AbortedFilter | None = None,
    start: int = 0,
    end: int | None = None,
) -> list[_Row]:
    """The records at or after `min_offset` as `row_type` tuples of (topic, partition, offset,
    timestamp, timestamp_type, key, value, headers), the consumer's ConsumerRecord: built in C
    straight from the bytes, with no Python code per record, when the extension is there.
    Control batches are skipped, and aborted transactions' batches when `aborted` is given; an
    incomplete trailing batch is ignored. Only the batches in data[start:end] are read (in
    place: a fetch answer's records are decoded where they lie in the received message)."""
    if not record_loop.compiled():
        cols = decode_columns(
            data, min_offset, validate_crc=validate_crc, aborted=aborted, start=start, end=end
        )
        make = cast(Callable[[tuple[Any, ...]], _Row], partial(tuple.__new__, row_type))
        return list(
            map(
                make,
                zip(
                    repeat(topic),
                    repeat(partition),
                    cols.offsets,
                    cols.timestamps,
                    cols.timestamp_types,
                    cols.keys,
                    cols.values,
                    cols.headers,
                ),
            )
        )
    rows: list[_Row] = []
    for batch in _data_batches(_in_place(data), min_offset, validate_crc, aborted, start, end):
        record_loop.rows_into(
            batch.records, batch.start, batch.end, batch.header.records_count,
            batch.header.base_offset, batch.header.base_timestamp, min_offset, row_type, topic,
            partition, batch.timestamp_type, batch.fixed_timestamp, rows,
        )  # fmt: skip
    return rows


@dataclass(frozen=True, slots=True)
class _DataBatch:
    header: BatchHeader
    records: bytes | bytearray  # the records are records[start:end] (decompressed if need be)
    start: int
    end: int
    timestamp_type: int
    fixed_timestamp: int | None  # every record's timestamp under LogAppendTime


def _data_batches(
    buf: bytes | bytearray,
    min_offset: int,
    validate_crc: bool,
    aborted: AbortedFilter | None = None,
    start: int = 0,
    end: int | None = None,
) -> Iterator[_DataBatch]:
    """The data (not control) batches of buf[start:end] that reach `min_offset` and `aborted`
    (if given) does not drop, checked and ready for a record loop; an incomplete trailing
    batch ends the iteration."""
    stop = _span(buf, start, end)
    pos = start
    while (found := _check_header(buf, pos, stop)) is not None:
        header, size = found
        attributes = header.attributes
        if aborted is not None and aborted and aborted.drops(header, buf, pos):
            pass
        elif header.base_offset + header.last_offset_delta >= min_offset and not (
            attributes & CONTROL_MASK
        ):
            if validate_crc:
                validate_batch(buf, pos)
            recs, start, end = _records_of(buf, pos, size, header)
            log_append = attributes & TIMESTAMP_TYPE_MASK
            yield _DataBatch(
                header,
                recs,
                start,
                end,
                LOG_APPEND_TIME if log_append else CREATE_TIME,
                header.max_timestamp if log_append else None,
            )
        pos += size


def records_wire(
    data: Buffer,
    min_offset: int,
    max_records: int = 0,
    *,
    validate_crc: bool = True,
    aborted: AbortedFilter | None = None,
) -> tuple[bytearray, int, int]:
    """The records at or after `min_offset` (at most `max_records`, 0: all) encoded as the
    repeated `records` field of the gateway's FetchRecordsResponse, built in C from the batch
    bytes (no Python object per record field; `record_loop.wire_into`); with how many and the
    last one's offset (-1: none). Control batches are skipped; an incomplete trailing batch is
    ignored. Raises InvalidBatchError on a corrupt batch, with `partial` set to what came
    before it. C only: callers check `record_loop.compiled()`."""
    out = bytearray()
    total, last = 0, -1
    try:
        for batch in _data_batches(_as_bytes(data), min_offset, validate_crc, aborted):
            added, batch_last = record_loop.wire_into(
                batch.records, batch.start, batch.end, batch.header.records_count,
                batch.header.base_offset, batch.header.base_timestamp, min_offset,
                batch.timestamp_type, batch.fixed_timestamp,
                max_records - total if max_records else 0, out,
            )  # fmt: skip
            if added:
                total, last = total + added, batch_last
            if max_records and total >= max_records:
                break
    except InvalidBatchError as exc:
        exc.partial = (out, total, last)  # type: ignore[attr-defined]
        raise
    return out, total, last


def iter_record_timestamps(
    batch: Buffer, pos: int = 0, *, validate_crc: bool = True
) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of every record of the ONE batch at `pos` (bytes after it ignored).

    For ListOffsets by timestamp on a storage node. Control batches are read too. Raises
    InvalidBatchError if the batch is corrupt or incomplete.
    """
    data = _as_bytes(batch)
    found = _check_header(data, pos, len(data))
    if found is None:
        raise InvalidBatchError(f"incomplete batch at {pos}")
    header, size = found
    if validate_crc:
        validate_batch(data, pos)
    out = RecordColumns()
    recs, start, end = _records_of(data, pos, size, header)
    record_loop.decode_into(
        recs, start, end, header.records_count, header.base_offset, header.base_timestamp,
        _MIN_INT64, *out.lists(),
    )  # fmt: skip
    if header.attributes & TIMESTAMP_TYPE_MASK:
        return zip(out.offsets, repeat(header.max_timestamp))
    return zip(out.offsets, out.timestamps, strict=True)


def next_fetch_offset(
    data: Buffer, position: int = 0, start: int = 0, end: int | None = None
) -> int:
    """The offset after the last complete batch in data[start:end], at least `position`: where
    a consumer that fetched from `position` fetches next. Reads headers only (no CRC check)."""
    buf = _in_place(data)
    stop = _span(buf, start, end)
    pos = start
    result = position
    while True:
        found = _check_header(buf, pos, stop)
        if found is None:
            return result
        header, size = found
        result = max(result, header.base_offset + header.last_offset_delta + 1)
        pos += size
