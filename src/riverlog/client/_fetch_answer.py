"""The consumer's FetchStream answers, read without copying their records (issue 10).

protobuf's parse copies a `bytes` field into its arena, and reading it (`answer.records`)
copies it again into a new `bytes`: two copies of every fetched byte (decision 0016, addendum
"FetchStream answers read in place": 4 to 6 % of the consumer's CPU at 1 KiB).
`parse_fetch_response` is the stream's response deserializer instead: it walks the message's
wire format (`FetchResponse` of data.proto), notes where each partition's `records` field
(8) lies in the received bytes, and lets protobuf parse the rest (everything but the records:
some tens of bytes a partition). The record loop then decodes each partition's batches where
they lie (`Chunk.answer(..., start, end)`, `reader.decode_rows(start=, end=)`).

Malformed input raises `DecodeError`, as protobuf's own parse does (grpcio then fails the
stream). As in protobuf, the last `records` field of a partition wins.
"""

from __future__ import annotations

from typing import Any, Final

from google.protobuf.message import DecodeError

from riverlog.common.wire import WireError, encode_varint, read_varint, skip_field
from riverlog.v1 import data_pb2

__all__ = ["FetchAnswer", "parse_fetch_response", "records_of"]

_PARTITIONS_KEY: Final = 0x0A  # field 1, length-delimited
_RECORDS_KEY: Final = 0x42  # field 8, length-delimited

Records = tuple[bytes | bytearray, int, int]
"""A partition's records: data[start:end] of `data`."""


class FetchAnswer:
    """A FetchResponse whose partitions' records are ranges of the received bytes (`data`: the
    stream's message, or the bytearray a direct fetch read its answer's records into,
    `consumer/direct.py`). The message's other fields read as on the protobuf message
    (`partitions[i].records` is empty: `records(i)` holds them)."""

    __slots__ = ("_ranges", "data", "message")

    def __init__(
        self, message: Any, data: bytes | bytearray, ranges: list[tuple[int, int]]
    ) -> None:
        self.message = message
        self.data = data
        self._ranges = ranges

    @property
    def partitions(self) -> Any:
        return self.message.partitions

    @property
    def correlation_id(self) -> int:
        return int(self.message.correlation_id)

    @property
    def pushed(self) -> bool:
        return bool(self.message.pushed)

    @property
    def throttle_time_ms(self) -> int:
        return int(self.message.throttle_time_ms)

    def records(self, index: int) -> Records:
        start, end = self._ranges[index]
        return self.data, start, end


def records_of(response: Any, index: int) -> Records:
    """The records of partition `index` of `response`: a `FetchAnswer` (the stream's) or a
    protobuf FetchResponse (a unary Fetch's)."""
    if isinstance(response, FetchAnswer):
        return response.records(index)
    data: bytes = response.partitions[index].records
    return data, 0, len(data)


def _partition(data: bytes, pos: int, end: int) -> tuple[list[bytes], tuple[int, int]]:
    """The FetchPartitionResponse in data[pos:end]: its bytes without the records field (as
    pieces) and the records' range (empty at `end` when it has none)."""
    pieces: list[bytes] = []
    records = (end, end)
    kept = pos  # the start of the bytes not yet put in `pieces`
    while pos < end:
        field_start = pos
        key, pos = read_varint(data, pos, end)
        if key == _RECORDS_KEY:
            size, pos = read_varint(data, pos, end)
            if pos + size > end:
                raise DecodeError("truncated records in a FetchResponse")
            pieces.append(data[kept:field_start])
            records = (pos, pos + size)
            pos = kept = pos + size
        else:
            pos = skip_field(data, pos, end, key & 7)
    pieces.append(data[kept:end])
    return pieces, records


def parse_fetch_response(data: bytes) -> FetchAnswer:
    """A FetchStream answer as received (grpcio's response deserializer)."""
    data = bytes(data) if type(data) is not bytes else data
    try:
        return _parse(data)
    except WireError as exc:
        raise DecodeError(f"{exc} in a FetchResponse") from None


def _parse(data: bytes) -> FetchAnswer:
    end = len(data)
    pieces: list[bytes] = []
    ranges: list[tuple[int, int]] = []
    pos = 0
    while pos < end:
        field_start = pos
        key, pos = read_varint(data, pos, end)
        if key == _PARTITIONS_KEY:
            size, pos = read_varint(data, pos, end)
            if pos + size > end:
                raise DecodeError("truncated partition in a FetchResponse")
            parts, records = _partition(data, pos, pos + size)
            head = b"".join(parts)
            pieces += (b"\x0a", encode_varint(len(head)), head)
            ranges.append(records)
            pos += size
        else:
            pos = skip_field(data, pos, end, key & 7)
            pieces.append(data[field_start:pos])
    message = data_pb2.FetchResponse.FromString(b"".join(pieces))
    return FetchAnswer(message, data, ranges)
