"""The subscription user data of Kafka's sticky assignors, byte for byte.

Both layouts are Kafka protocol-type schemas: big-endian integers, a STRING is an int16 length
then UTF-8 bytes, an ARRAY is an int32 count then the elements. Bytes after the last field are
ignored, as Kafka ignores them.

`StickyAssignor` ("sticky", eager): the member's last assignment and its generation, because an
eager member has revoked everything by the time it rejoins (its subscription's owned partitions
are empty) and only its assignor remembers what it had.

    STICKY_ASSIGNOR_USER_DATA_V1
      previous_assignment  ARRAY of
        topic              STRING
        partitions         ARRAY of INT32
      generation           INT32        (absent in V0, written by Kafka < 2.3)

    Topics appear in `HashMap` order (Kafka's `groupPartitionsByTopic`), partitions in
    assignment order; decoding tries V1, then V0, and treats anything unreadable as "no
    previous assignment, generation -1".

`CooperativeStickyAssignor` ("cooperative-sticky"): owned partitions travel in the subscription
itself (ConsumerProtocol v1+), so the user data only carries the generation they are from, for
members speaking ConsumerProtocol v1 (v2+ carries the generation too).

    COOPERATIVE_STICKY_ASSIGNOR_USER_DATA_V0
      generation           INT32
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from riverlog.common.types import TopicPartition

from ..abstract import DEFAULT_GENERATION
from ..javaorder import java_hash_order

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class _Truncated(ValueError):
    """The bytes end (or a length is negative) before the schema does."""


class _Reader:
    __slots__ = ("_data", "_pos")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def _take(self, size: int) -> bytes:
        if size < 0 or self._pos + size > len(self._data):
            raise _Truncated(f"need {size} bytes at offset {self._pos} of {len(self._data)}")
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int32(self) -> int:
        value: int = _INT32.unpack(self._take(4))[0]
        return value

    def string(self) -> str:
        (length,) = _INT16.unpack(self._take(2))
        # Java decodes malformed UTF-8 with replacement characters rather than failing
        return self._take(length).decode("utf-8", "replace")

    def array_count(self) -> int:
        count = self.int32()
        if count < 0:
            raise _Truncated(f"negative array size {count}")
        return count

    def int32_array(self) -> list[int]:
        return [self.int32() for _ in range(self.array_count())]


def encode_sticky_user_data(partitions: Sequence[TopicPartition], generation: int) -> bytes:
    """`StickyAssignor.serializeTopicPartitionAssignment` (always V1)."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(_INT32.pack(len(by_topic)))
    for topic in java_hash_order(by_topic):
        name = topic.encode("utf-8")
        out += _INT16.pack(len(name)) + name
        out += _INT32.pack(len(by_topic[topic]))
        for partition in by_topic[topic]:
            out += _INT32.pack(partition)
    out += _INT32.pack(generation)
    return bytes(out)


def _read_previous_assignment(reader: _Reader) -> list[TopicPartition]:
    partitions: list[TopicPartition] = []
    for _ in range(reader.array_count()):
        topic = reader.string()
        partitions.extend(TopicPartition(topic, p) for p in reader.int32_array())
    return partitions


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int | None]:
    """(previous assignment, generation or None for V0 data); never raises."""
    try:
        reader = _Reader(data)
        partitions = _read_previous_assignment(reader)
        return partitions, reader.int32()
    except (_Truncated, struct.error):
        pass
    try:
        return _read_previous_assignment(_Reader(data)), None
    except (_Truncated, struct.error):
        return [], DEFAULT_GENERATION


def encode_cooperative_user_data(generation: int) -> bytes:
    """`CooperativeStickyAssignor.subscriptionUserData`."""
    return _INT32.pack(generation)


def decode_cooperative_generation(data: bytes) -> int:
    """The generation in cooperative-sticky user data; -1 when unreadable, as in Kafka."""
    try:
        return _Reader(data).int32()
    except (_Truncated, struct.error):
        return DEFAULT_GENERATION
