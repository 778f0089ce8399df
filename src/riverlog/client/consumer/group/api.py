"""The group API a consumer needs from its coordinator, in the SDK's own terms: JoinGroup,
SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch (Kafka's classic protocol).

`GroupApi` is the seam between the consumer's group logic (`coordinator.py`, `heartbeat.py`,
`offsets.py`) and the wire: `grpc_api.GatewayGroupApi` implements it over the gateway's group
RPCs, and the unit tests implement it in process. Calls return the coordinator's error code in
the result (so the caller can act on REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED, ...) and raise
RiverlogError only when the call itself failed (gateway unreachable, deadline). An
implementation must be safe to call from two threads at once: the consumer's thread and its
heartbeat thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinMember:
    """One member as the leader sees it in the JoinGroup answer."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    error_code: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_name: str = ""
    leader: str = ""
    member_id: str = UNKNOWN_MEMBER_ID
    members: tuple[JoinMember, ...] = ()
    error_message: str = ""
    skip_assignment: bool = False

    @property
    def is_leader(self) -> bool:
        return bool(self.member_id) and self.leader == self.member_id


@dataclass(frozen=True, slots=True)
class SyncResult:
    error_code: ErrorCode
    assignment: bytes = b""
    protocol_name: str = ""
    error_message: str = ""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A partition's committed offset (-1: none) and its metadata, or the error fetching it."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1
    error_code: ErrorCode = ErrorCode.NONE


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """What commit_sync/commit_async take per partition: the offset of the NEXT record to
    read (the position), optional metadata, and the leader epoch when known."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """What `Consumer.group_metadata()` reports (Kafka's ConsumerGroupMetadata)."""

    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True, slots=True)
class GroupMember:
    """The identity a member sends on every group call after joining."""

    group_id: str
    member_id: str = UNKNOWN_MEMBER_ID
    generation_id: int = NO_GENERATION
    group_instance_id: str | None = None
    protocol_name: str = ""


@dataclass(frozen=True, slots=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: Sequence[tuple[str, bytes]]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class CommitRequest:
    member: GroupMember
    offsets: Mapping[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)


class GroupApi(Protocol):
    """The coordinator's group calls. `timeout_s` bounds one call."""

    def join_group(self, request: JoinRequest, timeout_s: float) -> JoinResult: ...

    def sync_group(
        self,
        member: GroupMember,
        protocol_type: str,
        assignments: Mapping[str, bytes],
        timeout_s: float,
    ) -> SyncResult: ...

    def heartbeat(self, member: GroupMember, timeout_s: float) -> ErrorCode: ...

    def leave_group(self, member: GroupMember, reason: str, timeout_s: float) -> ErrorCode: ...

    def offset_commit(
        self, request: CommitRequest, timeout_s: float
    ) -> dict[TopicPartition, ErrorCode]: ...

    def offset_fetch(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition],
        timeout_s: float,
        require_stable: bool = False,
    ) -> dict[TopicPartition, CommittedOffset]:
        """`require_stable` (KIP-447): a partition with offsets of a transaction still open
        answers UNSTABLE_OFFSET_COMMIT (retriable) instead of the offset before it."""
        ...

    def close(self) -> None: ...


def as_offsets(
    offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None,
) -> dict[TopicPartition, OffsetAndMetadata] | None:
    """What commit_sync/commit_async accept (plain ints or OffsetAndMetadata) as
    OffsetAndMetadata; None stays None ("every position")."""
    if offsets is None:
        return None
    return {
        tp: value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
        for tp, value in offsets.items()
    }
