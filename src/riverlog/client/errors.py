"""The SDK's own exceptions, beside the wire errors it rebuilds from codes.

Everything the cluster reports arrives as `riverlog.common.errors.RiverlogError` (its `code`,
`retriable` and `refresh_metadata` come from the one error catalog). The classes here cover what
the client itself decides: a wait that ran out, a closed client, a partition without a valid
position. Each is a RiverlogError with the closest code, so one `except RiverlogError` catches
them all, and a builtin base where one fits (`TimeoutError`).
"""

from __future__ import annotations

from collections.abc import Mapping

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

__all__ = [
    "ClientClosedError",
    "ClientTimeoutError",
    "CommitFailedError",
    "ErrorCode",
    "NoOffsetForPartitionError",
    "OffsetOutOfRangeError",
    "RebalanceInProgressError",
    "RecordTooLargeError",
    "RiverlogError",
]


class ClientTimeoutError(RiverlogError, TimeoutError):
    """A client-side wait ran out: max.block.ms (buffer full, topic not in metadata),
    delivery.timeout.ms, or the timeout given to flush, close or an offsets look-up.

    Catch it as RiverlogError (code REQUEST_TIMED_OUT) or as the builtin TimeoutError.
    """

    code = ErrorCode.REQUEST_TIMED_OUT


class ClientClosedError(RiverlogError, RuntimeError):
    """The client is closed: nothing more can be sent or read through it. Pending sends that a
    forced close abandons fail with it too."""

    code = ErrorCode.INVALID_REQUEST

    def __init__(self, what: str = "client", detail: str = "") -> None:
        super().__init__(f"the {what} is closed{': ' + detail if detail else ''}")


class RecordTooLargeError(RiverlogError):
    """One record is larger than max.request.size or buffer.memory allows; it is never sent."""

    code = ErrorCode.MESSAGE_TOO_LARGE


class OffsetOutOfRangeError(RiverlogError):
    """A partition has no valid position and auto.offset.reset is `none`: the position is
    unknown, or the fetch position fell outside the log. `partitions` maps each partition to
    the offending position (-1 when there was none)."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, partitions: Mapping[TopicPartition, int]) -> None:
        self.partitions = dict(partitions)
        parts = ", ".join(
            f"{tp} (no position)" if offset < 0 else f"{tp} at offset {offset}"
            for tp, offset in sorted(self.partitions.items())
        )
        super().__init__(
            f"no valid position for {parts} and auto.offset.reset is 'none': seek() first"
        )


class NoOffsetForPartitionError(OffsetOutOfRangeError):
    """A partition has no committed offset and no position, and auto.offset.reset is `none`
    (Kafka's NoOffsetForPartitionException)."""


class CommitFailedError(RiverlogError):
    """A commit was refused because this member is no longer part of the group generation it
    committed for (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID): its partitions were (or will be)
    given to other members. The consumer rejoins at its next poll(); the records it read since
    its last successful commit may be read again by the new owner (Kafka's
    CommitFailedException)."""

    code = ErrorCode.ILLEGAL_GENERATION


class RebalanceInProgressError(RiverlogError):
    """A commit was refused because the group is rebalancing; the consumer rejoins at its next
    poll(), after which committing the partitions it still owns succeeds."""

    code = ErrorCode.REBALANCE_IN_PROGRESS
