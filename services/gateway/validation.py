"""Checks on client input, done at the gateway so nothing it already knows is wrong is forwarded.

Per-item problems (a bad topic name, a negative partition or offset, a payload that is not
record batches, the same partition twice, a client append to or record deletion of an internal
topic, which Kafka refuses too) become a `RiverlogError` for that item alone, which
the request family turns into the item's `error_code`/`error_message`; problems with the request
as a whole (unknown acks, negative sizes or timeouts) are raised and leave as INVALID_ARGUMENT.
Batch payloads are checked by framing only (magic and lengths from the headers): the CRC and the
records are the leader's business, so the gateway never reads past a header.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Final

from riverlog.common.cluster.image import OFFSETS_TOPIC
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.header import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    InvalidBatchError,
    peek_size,
)
from riverlog.common.types import TopicPartition

# Kafka's topic name rules (Topic.java): 1..249 of [a-zA-Z0-9._-], not "." or "..".
MAX_TOPIC_NAME_LENGTH: Final = 249
_TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")
_INT32_MAX: Final = 2**31 - 1
_MAGIC_POS: Final = 16
# Kafka's Topic.isInternal: only the services write them (the coordinators straight to the
# storage nodes), never a client through the gateway.
INTERNAL_TOPICS: Final = frozenset({OFFSETS_TOPIC, "__transaction_state"})


def topic_error(name: str) -> RiverlogError | None:
    """Why `name` cannot be a topic, or None when it can."""
    if not name:
        return RiverlogError("the topic name is empty", ErrorCode.INVALID_TOPIC_EXCEPTION)
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return RiverlogError(
            f"the topic name is {len(name)} characters long; at most "
            f"{MAX_TOPIC_NAME_LENGTH} are allowed",
            ErrorCode.INVALID_TOPIC_EXCEPTION,
        )
    if name in (".", "..") or not _TOPIC_NAME.fullmatch(name):
        return RiverlogError(
            f"invalid topic name {_shown(name)}: use only ASCII letters, digits, '.', '_' and '-'",
            ErrorCode.INVALID_TOPIC_EXCEPTION,
        )
    return None


def internal_topic_error(topic: str, action: str) -> RiverlogError | None:
    """Why a client may not `action` ("append to", "delete records of") `topic`, or None."""
    if topic in INTERNAL_TOPICS:
        return RiverlogError(
            f"Cannot {action} internal topic {topic}", ErrorCode.INVALID_TOPIC_EXCEPTION
        )
    return None


def partition_error(tp: TopicPartition) -> RiverlogError | None:
    """Topic name and partition number checks for one item."""
    error = topic_error(tp.topic)
    if error is not None:
        return error
    if tp.partition < 0:
        return RiverlogError(
            f"partition {tp.partition} of {_shown(tp.topic)} is negative", ErrorCode.INVALID_REQUEST
        )
    return None


def duplicates(tps: Iterable[TopicPartition]) -> set[int]:
    """Indexes of items naming a partition already named earlier in the same request."""
    seen: set[TopicPartition] = set()
    out: set[int] = set()
    for index, tp in enumerate(tps):
        if tp in seen:
            out.add(index)
        seen.add(tp)
    return out


def duplicate_error(tp: TopicPartition) -> RiverlogError:
    return RiverlogError(
        f"partition {tp} appears more than once in the request", ErrorCode.INVALID_REQUEST
    )


def item_errors(
    tps: Sequence[TopicPartition], extra: Callable[[int], RiverlogError | None] | None = None
) -> dict[int, RiverlogError]:
    """Per-index errors for bad names, negative partitions and repeats, then `extra(index)`
    (the family's own checks) for the items that passed those."""
    errors: dict[int, RiverlogError] = {}
    for index, tp in enumerate(tps):
        error = partition_error(tp)
        if error is None and extra is not None:
            error = extra(index)
        if error is not None:
            errors[index] = error
    for index in duplicates(tps):
        errors.setdefault(index, duplicate_error(tps[index]))
    return errors


def batch_payload_error(data: bytes | memoryview) -> RiverlogError | None:
    """Why `data` is not one or more whole RecordBatch v2, judged by the headers alone."""
    if not data:
        return RiverlogError("no record batch in the payload", ErrorCode.INVALID_REQUEST)
    pos = 0
    end = len(data)
    while pos < end:
        try:
            size = peek_size(data, pos)
        except InvalidBatchError as exc:
            return RiverlogError(f"invalid record batch framing: {exc}", ErrorCode.CORRUPT_MESSAGE)
        if end - pos < HEADER_SIZE or size < 0:
            return RiverlogError(
                f"truncated record batch at byte {pos}: {end - pos} bytes, the header alone "
                f"takes {HEADER_SIZE}",
                ErrorCode.CORRUPT_MESSAGE,
            )
        magic = data[pos + _MAGIC_POS]
        if magic != MAGIC:
            return RiverlogError(
                f"record batch at byte {pos} has magic {magic}; only RecordBatch v2 (magic 2) "
                "is accepted",
                ErrorCode.CORRUPT_MESSAGE,
            )
        if size < HEADER_SIZE or size - LOG_OVERHEAD > _INT32_MAX:
            return RiverlogError(
                f"record batch at byte {pos} declares an impossible length",
                ErrorCode.CORRUPT_MESSAGE,
            )
        if pos + size > end:
            return RiverlogError(
                f"torn record batch at byte {pos}: {size} bytes declared, {end - pos} present",
                ErrorCode.CORRUPT_MESSAGE,
            )
        pos += size
    return None


def offset_error(offset: int, *, allow_minus_one: bool = False) -> RiverlogError | None:
    if offset >= 0 or (allow_minus_one and offset == -1):
        return None
    return RiverlogError(f"offset {offset} is negative", ErrorCode.INVALID_OFFSET)


def require(condition: bool, message: str, code: ErrorCode = ErrorCode.INVALID_REQUEST) -> None:
    """Raise a whole-request error (INVALID_ARGUMENT on the wire) unless `condition`."""
    if not condition:
        raise RiverlogError(message, code)


def _shown(name: str) -> str:
    """A name fit for an error message: quoted, printable, and not unboundedly long."""
    text = name if len(name) <= 64 else name[:61] + "..."
    return repr(text)
