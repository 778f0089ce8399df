"""`GatewayGroupApi`: the `GroupApi` over the gateway's group RPCs (coordinator.proto's
messages), which the gateway routes to the coordinator instance owning the group.

Converters are named `x_to_proto` / `x_from_proto`. A failed call (gateway unreachable,
deadline) raises RiverlogError from `GatewayConnection.call`; a whole-request error code in an
answer (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...) is returned as the result's code,
or as every partition's code for offset calls, so callers handle both the same way.
Thread-safe: the consumer's thread, the heartbeat thread and the commit worker share it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from riverlog.common.errors import ErrorCode, code_of
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2 as pb

from ..._connection import GatewayConnection
from ..._metadata import MetadataCache
from .api import (
    CommitRequest,
    CommittedOffset,
    GroupMember,
    JoinMember,
    JoinRequest,
    JoinResult,
    SyncResult,
)


def join_request_to_proto(request: JoinRequest, client_id: str) -> pb.JoinGroupRequest:
    message = pb.JoinGroupRequest(
        group_id=request.group_id,
        session_timeout_ms=request.session_timeout_ms,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocols=[pb.JoinGroupProtocol(name=n, metadata=m) for n, m in request.protocols],
        reason=request.reason,
        client_id=client_id,
    )
    if request.group_instance_id is not None:
        message.group_instance_id = request.group_instance_id
    return message


def join_result_from_proto(response: pb.JoinGroupResponse) -> JoinResult:
    return JoinResult(
        error_code=code_of(response.error_code),
        generation_id=response.generation_id,
        protocol_name=response.protocol_name,
        leader=response.leader,
        member_id=response.member_id,
        members=tuple(
            JoinMember(
                m.member_id,
                m.group_instance_id if m.HasField("group_instance_id") else None,
                m.metadata,
            )
            for m in response.members
        ),
        error_message=response.error_message,
        skip_assignment=response.skip_assignment,
    )


def offsets_to_proto(request: CommitRequest) -> pb.OffsetCommitRequest:
    member = request.member
    topics: dict[str, list[pb.OffsetCommitPartition]] = {}
    for tp, value in sorted(request.offsets.items()):
        topics.setdefault(tp.topic, []).append(
            pb.OffsetCommitPartition(
                partition=tp.partition,
                committed_offset=value.offset,
                committed_leader_epoch=value.leader_epoch,
                metadata=value.metadata,
            )
        )
    message = pb.OffsetCommitRequest(
        group_id=member.group_id,
        generation_id=member.generation_id,
        member_id=member.member_id,
        topics=[pb.OffsetCommitTopic(name=t, partitions=p) for t, p in topics.items()],
    )
    if member.group_instance_id is not None:
        message.group_instance_id = member.group_instance_id
    return message


class GatewayGroupApi:
    """Group calls through the gateway; see the module docstring."""

    def __init__(self, conn: GatewayConnection) -> None:
        self._conn = conn

    def join_group(self, request: JoinRequest, timeout_s: float) -> JoinResult:
        message = join_request_to_proto(request, self._conn.client_id)
        response = self._conn.call(lambda s: s.JoinGroup, message, timeout_s)
        return join_result_from_proto(response)

    def sync_group(
        self,
        member: GroupMember,
        protocol_type: str,
        assignments: Mapping[str, bytes],
        timeout_s: float,
    ) -> SyncResult:
        message = pb.SyncGroupRequest(
            group_id=member.group_id,
            generation_id=member.generation_id,
            member_id=member.member_id,
            protocol_type=protocol_type,
            protocol_name=member.protocol_name,
            assignments=[
                pb.SyncGroupAssignment(member_id=m, assignment=a) for m, a in assignments.items()
            ],
        )
        if member.group_instance_id is not None:
            message.group_instance_id = member.group_instance_id
        response = self._conn.call(lambda s: s.SyncGroup, message, timeout_s)
        return SyncResult(
            code_of(response.error_code),
            response.assignment,
            response.protocol_name,
            response.error_message,
        )

    def heartbeat(self, member: GroupMember, timeout_s: float) -> ErrorCode:
        message = pb.GroupHeartbeatRequest(
            group_id=member.group_id,
            generation_id=member.generation_id,
            member_id=member.member_id,
        )
        if member.group_instance_id is not None:
            message.group_instance_id = member.group_instance_id
        response = self._conn.call(lambda s: s.Heartbeat, message, timeout_s)
        return code_of(response.error_code)

    def leave_group(self, member: GroupMember, reason: str, timeout_s: float) -> ErrorCode:
        leaving = pb.LeavingMember(member_id=member.member_id, reason=reason)
        if member.group_instance_id is not None:
            leaving.group_instance_id = member.group_instance_id
        message = pb.LeaveGroupRequest(group_id=member.group_id, members=[leaving])
        response = self._conn.call(lambda s: s.LeaveGroup, message, timeout_s)
        if response.error_code != ErrorCode.NONE:
            return code_of(response.error_code)
        codes = [code_of(m.error_code) for m in response.members]
        return next((c for c in codes if c != ErrorCode.NONE), ErrorCode.NONE)

    def offset_commit(
        self, request: CommitRequest, timeout_s: float
    ) -> dict[TopicPartition, ErrorCode]:
        response = self._conn.call(lambda s: s.OffsetCommit, offsets_to_proto(request), timeout_s)
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(request.offsets, code_of(response.error_code))
        results = dict.fromkeys(request.offsets, ErrorCode.UNKNOWN_SERVER_ERROR)
        for topic in response.topics:
            for part in topic.partitions:
                results[TopicPartition(topic.name, part.partition)] = code_of(part.error_code)
        return results

    def offset_fetch(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition],
        timeout_s: float,
        require_stable: bool = False,
    ) -> dict[TopicPartition, CommittedOffset]:
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        message = pb.OffsetFetchRequest(
            group_id=group_id,
            topics=[pb.OffsetFetchTopic(name=t, partitions=p) for t, p in topics.items()],
            all_topics=not partitions,
            require_stable=require_stable,
        )
        response = self._conn.call(lambda s: s.OffsetFetch, message, timeout_s)
        if response.error_code != ErrorCode.NONE:
            failed = CommittedOffset(-1, error_code=code_of(response.error_code))
            return dict.fromkeys(partitions, failed)
        return committed_from_proto(response)

    def close(self) -> None:
        return None


def committed_from_proto(response: pb.OffsetFetchResponse) -> dict[TopicPartition, CommittedOffset]:
    return {
        TopicPartition(topic.name, part.partition): CommittedOffset(
            part.committed_offset,
            part.metadata,
            part.committed_leader_epoch,
            code_of(part.error_code),
        )
        for topic in response.topics
        for part in topic.partitions
    }


class MetadataTopicSource:
    """The group's view of topic metadata (partition counts) over the SDK's cache."""

    def __init__(self, cache: MetadataCache) -> None:
        self._cache = cache

    def partition_counts(self, topics: Sequence[str] | None) -> dict[str, int]:
        found = self._cache.refresh(list(topics) if topics is not None else [])
        return {name: info.num_partitions for name, info in found.items()}
