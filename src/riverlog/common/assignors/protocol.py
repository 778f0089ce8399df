"""Kafka's ConsumerProtocol: the member metadata and assignment bytes of the "consumer" group type.

A member joins with one metadata blob per assignor it supports; the leader (or the coordinator)
answers with one assignment blob per member. Using Kafka's layout byte for byte lets any client
that speaks Kafka's consumer protocol join a Riverlog group, and lets the coordinator read what
our SDK sends. Integers are big-endian; a STRING is an int16 length then UTF-8 bytes (a nullable
one uses length -1 for null); BYTES are an int32 length then the bytes (-1 for null); an ARRAY
is an int32 count then the elements. Every blob starts with its int16 version.

    Subscription (ConsumerProtocolSubscription, versions 0-3)
      version            INT16
      topics             ARRAY of STRING           sorted when encoding
      user_data          nullable BYTES            the assignor's (`subscription_user_data`)
      owned_partitions   ARRAY of                  v1+; sorted by topic, then partition
        topic            STRING
        partitions       ARRAY of INT32
      generation_id      INT32                     v2+; -1 when unknown
      rack_id            nullable STRING           v3+; empty or null means no rack

    Assignment (ConsumerProtocolAssignment, versions 0-3, all with this body)
      version            INT16
      assigned_partitions ARRAY of
        topic            STRING                    topics in order of first appearance
        partitions       ARRAY of INT32
      user_data          nullable BYTES

As in Kafka, a newer version is read as the newest known one (later versions only append
fields, and trailing bytes are ignored), a version above 3 is written as 3, and a negative
version is an error. `group_instance_id` is not part of the blob: the coordinator takes it from
the JoinGroup request. Malformed bytes raise `ConsumerProtocolError` saying what and where.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from riverlog.common.types import TopicPartition

from .abstract import DEFAULT_GENERATION, Assignment, Subscription
from .javaorder import java_str_key

CONSUMER_PROTOCOL_TYPE = "consumer"
LOWEST_VERSION = 0
HIGHEST_VERSION = 3

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_MAX_STRING_BYTES = 0x7FFF


class ConsumerProtocolError(ValueError):
    """The bytes are not a valid ConsumerProtocol subscription or assignment."""


class _Writer:
    __slots__ = ("out",)

    def __init__(self, version: int) -> None:
        self.out = bytearray(_INT16.pack(version))

    def int32(self, value: int) -> None:
        self.out += _INT32.pack(value)

    def string(self, value: str | None, field: str) -> None:
        if value is None:
            self.out += _INT16.pack(-1)
            return
        data = value.encode("utf-8")
        if len(data) > _MAX_STRING_BYTES:
            raise ValueError(f"{field} is {len(data)} bytes; a STRING holds at most 32767")
        self.out += _INT16.pack(len(data)) + data

    def nullable_bytes(self, value: bytes | None) -> None:
        if value is None:
            self.int32(-1)
        else:
            self.int32(len(value))
            self.out += value

    def topic_partitions(self, partitions: Iterable[TopicPartition], field: str) -> None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        self.int32(len(by_topic))
        for topic, numbers in by_topic.items():
            self.string(topic, field)
            self.int32(len(numbers))
            for number in numbers:
                self.int32(number)


class _Reader:
    __slots__ = ("_data", "_pos", "_what")

    def __init__(self, data: bytes | bytearray | memoryview, what: str) -> None:
        self._data = bytes(data)
        self._pos = 0
        self._what = what

    def _error(self, message: str) -> ConsumerProtocolError:
        return ConsumerProtocolError(f"corrupt {self._what} at byte {self._pos}: {message}")

    def _take(self, size: int, field: str) -> bytes:
        if self._pos + size > len(self._data):
            remaining = len(self._data) - self._pos
            raise self._error(f"{field} needs {size} bytes, only {remaining} left")
        chunk = self._data[self._pos : self._pos + size]
        self._pos += size
        return chunk

    def int16(self, field: str) -> int:
        value: int = _INT16.unpack(self._take(2, field))[0]
        return value

    def int32(self, field: str) -> int:
        value: int = _INT32.unpack(self._take(4, field))[0]
        return value

    def string(self, field: str) -> str:
        length = self.int16(field)
        if length < 0:
            raise self._error(f"{field} has length {length} (null is not allowed)")
        return self._utf8(length, field)

    def nullable_string(self, field: str) -> str | None:
        length = self.int16(field)
        if length == -1:
            return None
        if length < 0:
            raise self._error(f"{field} has length {length}")
        return self._utf8(length, field)

    def _utf8(self, length: int, field: str) -> str:
        raw = self._take(length, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self._error(f"{field} is not UTF-8 ({e.reason})") from None

    def nullable_bytes(self, field: str) -> bytes | None:
        length = self.int32(field)
        if length == -1:
            return None
        if length < 0:
            raise self._error(f"{field} has length {length}")
        return self._take(length, field)

    def array_count(self, field: str, min_element_size: int) -> int:
        count = self.int32(field)
        if count < 0:
            raise self._error(f"{field} has {count} elements (null is not allowed)")
        if count * min_element_size > len(self._data) - self._pos:
            raise self._error(f"{field} claims {count} elements, more than the bytes left")
        return count

    def topic_partitions(self, field: str) -> list[TopicPartition]:
        partitions: list[TopicPartition] = []
        for _ in range(self.array_count(field, 6)):
            topic = self.string(f"{field}.topic")
            for _ in range(self.array_count(f"{field}.partitions", 4)):
                partitions.append(TopicPartition(topic, self.int32(f"{field}.partitions")))
        return partitions


def _check_write_version(version: int) -> int:
    if version < LOWEST_VERSION:
        raise ValueError(f"unsupported ConsumerProtocol version {version}")
    return min(version, HIGHEST_VERSION)


def encode_subscription(subscription: Subscription, version: int = HIGHEST_VERSION) -> bytes:
    """Kafka's `ConsumerProtocol.serializeSubscription`; fields newer than `version` are left
    out (owned partitions before v1, generation before v2, rack before v3)."""
    version = _check_write_version(version)
    writer = _Writer(version)
    topics = sorted(subscription.topics, key=java_str_key)
    writer.int32(len(topics))
    for topic in topics:
        writer.string(topic, "topics")
    writer.nullable_bytes(subscription.user_data)
    if version >= 1:
        owned = sorted(subscription.owned_partitions, key=lambda tp: (java_str_key(tp.topic), tp))
        writer.topic_partitions(owned, "owned_partitions")
    if version >= 2:
        writer.int32(max(subscription.generation_id, DEFAULT_GENERATION))
    if version >= 3:
        writer.string(subscription.rack_id, "rack_id")
    return bytes(writer.out)


def decode_subscription(data: bytes | bytearray | memoryview) -> Subscription:
    """Kafka's `ConsumerProtocol.deserializeSubscription`."""
    reader = _Reader(data, "subscription")
    version = reader.int16("version")
    if version < LOWEST_VERSION:
        raise ConsumerProtocolError(f"unsupported subscription version {version}")
    topics = [reader.string("topics") for _ in range(reader.array_count("topics", 2))]
    user_data = reader.nullable_bytes("user_data")
    owned = reader.topic_partitions("owned_partitions") if version >= 1 else []
    generation = reader.int32("generation_id") if version >= 2 else DEFAULT_GENERATION
    rack = reader.nullable_string("rack_id") if version >= 3 else None
    return Subscription(
        topics=topics,
        user_data=user_data,
        owned_partitions=owned,
        generation_id=max(generation, DEFAULT_GENERATION),
        rack_id=rack or None,
    )


def encode_assignment(assignment: Assignment, version: int = HIGHEST_VERSION) -> bytes:
    """Kafka's `ConsumerProtocol.serializeAssignment`."""
    writer = _Writer(_check_write_version(version))
    writer.topic_partitions(assignment.partitions, "assigned_partitions")
    writer.nullable_bytes(assignment.user_data)
    return bytes(writer.out)


def decode_assignment(data: bytes | bytearray | memoryview) -> Assignment:
    """Kafka's `ConsumerProtocol.deserializeAssignment`."""
    reader = _Reader(data, "assignment")
    version = reader.int16("version")
    if version < LOWEST_VERSION:
        raise ConsumerProtocolError(f"unsupported assignment version {version}")
    partitions = reader.topic_partitions("assigned_partitions")
    return Assignment(partitions, reader.nullable_bytes("user_data"))
