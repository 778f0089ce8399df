"""ListOffsets and DeleteRecords: per-partition questions and commands answered by leaders.

Both are routed exactly as produce and fetch are (split by leader, parallel calls, stale routes
retried, results in request order); this module only knows their inputs and what makes an item
wrong before it travels: an unknown offset spec, a negative timestamp, an offset below -1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from riverlog.common.cluster.image import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import IsolationLevel, OffsetSpec, TopicPartition

from .config import GatewayConfig
from .context import Deadline, RequestContext
from .routing.router import Router, merge
from .validation import internal_topic_error, item_errors, offset_error, require

_INT32_MAX: Final = 2**31 - 1

_SPECS: Final = frozenset(OffsetSpec)
_ISOLATION_LEVELS: Final = frozenset(IsolationLevel)


@dataclass(frozen=True, slots=True)
class ListOffsetsPart:
    tp: TopicPartition
    spec: OffsetSpec | None = OffsetSpec.LATEST
    """None: the request named a spec the wire does not define (refused)."""
    timestamp_ms: int = 0
    current_leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ListOffsetsPartResult:
    tp: TopicPartition
    error_code: int = ErrorCode.NONE
    error_message: str = ""
    timestamp_ms: int = -1
    offset: int = -1
    leader_epoch: int = -1

    @classmethod
    def failed(cls, part: ListOffsetsPart, error: RiverlogError) -> ListOffsetsPartResult:
        return cls(part.tp, int(error.code), error.message)


@dataclass(frozen=True, slots=True)
class DeleteRecordsPart:
    tp: TopicPartition
    offset: int  # the new log start offset; -1: the high watermark


@dataclass(frozen=True, slots=True)
class DeleteRecordsPartResult:
    tp: TopicPartition
    error_code: int = ErrorCode.NONE
    error_message: str = ""
    low_watermark: int = -1

    @classmethod
    def failed(cls, part: DeleteRecordsPart, error: RiverlogError) -> DeleteRecordsPartResult:
        return cls(part.tp, int(error.code), error.message)


class OffsetsSender(Protocol):
    """Sends one leader its share (implemented by `peers.storage`)."""

    async def list_offsets(
        self,
        node: NodeInfo,
        isolation_level: IsolationLevel,
        parts: list[ListOffsetsPart],
        deadline: Deadline,
    ) -> list[ListOffsetsPartResult]: ...

    async def delete_records(
        self, node: NodeInfo, timeout_ms: int, parts: list[DeleteRecordsPart], deadline: Deadline
    ) -> list[DeleteRecordsPartResult]: ...


class Offsets:
    """Handles ListOffsets and DeleteRecords. Stateless; safe from many tasks at once."""

    def __init__(self, router: Router, sender: OffsetsSender, config: GatewayConfig) -> None:
        self.router = router
        self.sender = sender
        self.config = config

    async def list_offsets(
        self,
        ctx: RequestContext,
        isolation_level: IsolationLevel | None,
        parts: Sequence[ListOffsetsPart],
    ) -> list[ListOffsetsPartResult]:
        if isolation_level is None or isolation_level not in _ISOLATION_LEVELS:
            raise RiverlogError(
                f"unknown isolation level {isolation_level}", ErrorCode.INVALID_REQUEST
            )
        level = IsolationLevel(isolation_level)
        errors = item_errors([p.tp for p in parts], lambda i: _spec_error(parts[i]))
        answered = {i: ListOffsetsPartResult.failed(parts[i], e) for i, e in errors.items()}
        routed = [i for i in range(len(parts)) if i not in answered]
        if not routed:
            return merge(len(parts), answered, [], [])

        async def send(
            node: NodeInfo, batch: list[ListOffsetsPart], deadline: Deadline
        ) -> list[ListOffsetsPartResult]:
            return await self.sender.list_offsets(node, level, batch, deadline)

        results = await self.router.dispatch(
            [parts[i] for i in routed], send, ListOffsetsPartResult.failed, ctx.deadline
        )
        return merge(len(parts), answered, routed, results)

    async def delete_records(
        self, ctx: RequestContext, timeout_ms: int, parts: Sequence[DeleteRecordsPart]
    ) -> list[DeleteRecordsPartResult]:
        require(
            0 <= timeout_ms <= _INT32_MAX,
            f"timeout_ms must be between 0 and {_INT32_MAX}, got {timeout_ms}",
        )
        timeout_ms = timeout_ms or self.config.request_timeout_ms
        errors = item_errors(
            [p.tp for p in parts],
            lambda i: (
                internal_topic_error(parts[i].tp.topic, "delete records of")
                or offset_error(parts[i].offset, allow_minus_one=True)
            ),
        )
        answered = {i: DeleteRecordsPartResult.failed(parts[i], e) for i, e in errors.items()}
        routed = [i for i in range(len(parts)) if i not in answered]
        if not routed:
            return merge(len(parts), answered, [], [])

        async def send(
            node: NodeInfo, batch: list[DeleteRecordsPart], deadline: Deadline
        ) -> list[DeleteRecordsPartResult]:
            bounded = min(timeout_ms, max(int(deadline.remaining() * 1000), 1))
            return await self.sender.delete_records(node, bounded, batch, deadline)

        results = await self.router.dispatch(
            [parts[i] for i in routed], send, DeleteRecordsPartResult.failed, ctx.deadline
        )
        return merge(len(parts), answered, routed, results)


def _spec_error(part: ListOffsetsPart) -> RiverlogError | None:
    if part.spec not in _SPECS:
        return RiverlogError(
            f"unknown offset spec {part.spec} for {part.tp} (TIMESTAMP=0, LATEST=1, "
            "EARLIEST=2, MAX_TIMESTAMP=3, EARLIEST_LOCAL=4)",
            ErrorCode.INVALID_REQUEST,
        )
    if part.spec is OffsetSpec.TIMESTAMP and part.timestamp_ms < 0:
        return RiverlogError(
            f"timestamp {part.timestamp_ms} for {part.tp} is negative", ErrorCode.INVALID_TIMESTAMP
        )
    return None
