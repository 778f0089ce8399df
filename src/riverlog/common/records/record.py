"""One decoded record, and the byte layout of a record inside a RecordBatch v2.

A NamedTuple, because the consumer creates one per record and a tuple is the cheapest Python
object to create from C (`tuple.__new__` through `map`, no Python-level `__init__`). Inside a
batch (after the 61-byte header, decompressed if the batch is compressed), each record is:

    field           encoding
    length          varint   bytes of the record after this field
    attributes      int8     unused, always 0
    timestampDelta  varlong  timestamp - batch baseTimestamp (may be negative)
    offsetDelta     varint   offset - batch baseOffset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headersCount    varint
    headers         [headerKeyLength varint, headerKey utf-8,
                     headerValueLength varint (-1 null), headerValue bytes] * headersCount

Varints are zigzag (see `varint.py`).
"""

from __future__ import annotations

from typing import NamedTuple, TypeAlias

Header: TypeAlias = tuple[str, bytes | None]
"""A record header: a UTF-8 key and a nullable value."""

CREATE_TIME = 0
LOG_APPEND_TIME = 1


class Record(NamedTuple):
    """A record as a consumer sees it.

    `timestamp_type` is CREATE_TIME (the producer's timestamp) or LOG_APPEND_TIME (the leader's
    append time: then `timestamp` is the batch's maxTimestamp). `headers` is a fresh list per
    record, in wire order; keys may repeat.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    timestamp_type: int = CREATE_TIME
