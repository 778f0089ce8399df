"""A `data_pb2.ProduceRequest` read from its wire bytes by hand, each partition's records left in
place as a memoryview of the received bytes (decision 0015's addendum, perf-kib).

The gateway used protobuf's parse (which copies each batch into its arena) and then read
`records` (a second copy into a `bytes`) before the lane frame copied them a third time; read
here, the lane's join is the only copy after grpcio's. The request has a handful of fields and
a few partitions, so the walk costs little in Python whatever the batch sizes. The rules are
protobuf's (proto3): fields in any order, a repeated message field per occurrence, the last
value of a scalar wins, unknown fields of any wire type skipped, int32 values truncated to 32
bits as protobuf does, strings strict UTF-8. Bytes that are no request raise ValueError with
the reason; grpc then fails the call (or the stream) with an error status, as it did when
protobuf's own parse raised (nothing is appended). Stricter than protobuf in one way: a known
field with the wrong wire type is refused, not kept as an unknown field.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .wire import read_varint


@dataclass(slots=True)
class ParsedProducePartition:
    topic: str = ""
    partition: int = 0
    records: memoryview = field(default_factory=lambda: memoryview(b""))
    current_leader_epoch: int | None = None


@dataclass(slots=True)
class ParsedProduceRequest:
    """The fields of a ProduceRequest; `partitions[i].records` are views into the bytes read."""

    acks: int = 0
    timeout_ms: int = 0
    partitions: list[ParsedProducePartition] = field(default_factory=list)
    transactional_id: str = ""
    correlation_id: int = 0


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _int64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _field(data: memoryview, pos: int, end: int) -> tuple[int, int, int, int]:
    """(number, wire type, value or length, position after the key and a varint / the length)."""
    key, pos = read_varint(data, pos, end)
    number, wire = key >> 3, key & 7
    if number == 0:
        raise ValueError("field number 0")
    if wire == 0:
        value, pos = read_varint(data, pos, end)
        return number, wire, value, pos
    if wire == 2:
        size, pos = read_varint(data, pos, end)
        if size > end - pos:
            raise ValueError(f"field {number}: {size} bytes past the end of the message")
        return number, wire, size, pos
    if wire == 1 or wire == 5:
        size = 8 if wire == 1 else 4
        if size > end - pos:
            raise ValueError(f"field {number}: truncated fixed-size value")
        return number, wire, size, pos
    raise ValueError(f"field {number}: unsupported wire type {wire}")


def _after(wire: int, value: int, pos: int) -> int:
    return pos + value if wire != 0 else pos


def _text(data: memoryview, pos: int, size: int) -> str:
    try:
        return str(data[pos : pos + size], "utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"a string field is not valid UTF-8: {exc}") from None


def _partition(data: memoryview, pos: int, end: int) -> ParsedProducePartition:
    part = ParsedProducePartition()
    while pos < end:
        number, wire, value, pos = _field(data, pos, end)
        if number == 1 and wire == 2:
            part.topic = _text(data, pos, value)
        elif number == 2 and wire == 0:
            part.partition = _int32(value)
        elif number == 3 and wire == 2:
            part.records = data[pos : pos + value]
        elif number == 4 and wire == 0:
            part.current_leader_epoch = _int32(value)
        elif number in (1, 2, 3, 4):
            raise ValueError(f"ProducePartition field {number} has wire type {wire}")
        pos = _after(wire, value, pos)
    return part


def parse_produce_request(data: bytes | bytearray | memoryview) -> ParsedProduceRequest:
    """`data` read as a ProduceRequest; ValueError when it is not one."""
    view = memoryview(data)
    end = len(view)
    request = ParsedProduceRequest()
    pos = 0
    while pos < end:
        number, wire, value, pos = _field(view, pos, end)
        if number == 3 and wire == 2:
            request.partitions.append(_partition(view, pos, pos + value))
        elif number == 1 and wire == 0:
            request.acks = _int32(value)
        elif number == 2 and wire == 0:
            request.timeout_ms = _int32(value)
        elif number == 4 and wire == 2:
            request.transactional_id = _text(view, pos, value)
        elif number == 5 and wire == 0:
            request.correlation_id = _int64(value)
        elif number in (1, 2, 3, 4, 5):
            raise ValueError(f"ProduceRequest field {number} has wire type {wire}")
        pos = _after(wire, value, pos)
    return request
