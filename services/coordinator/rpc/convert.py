"""Converters between the coordinator's domain values and `coordinator.proto` messages
(`x_from_proto` / `x_to_proto`). The only place that knows both."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2 as pb

from ..coordinator import GroupDescription
from ..group.member import JoinRequest, JoinResponse, Protocol, SyncRequest, SyncResponse
from ..offsets.store import CommitItem, CommitRequest, FetchedOffset, TxnCommitRequest


def _instance(
    msg: pb.JoinGroupRequest
    | pb.SyncGroupRequest
    | pb.OffsetCommitRequest
    | pb.TxnOffsetCommitRequest,
) -> str | None:
    return msg.group_instance_id if msg.HasField("group_instance_id") else None


def join_from_proto(msg: pb.JoinGroupRequest) -> JoinRequest:
    return JoinRequest(
        group_id=msg.group_id,
        member_id=msg.member_id,
        protocol_type=msg.protocol_type,
        protocols=tuple(Protocol(p.name, bytes(p.metadata)) for p in msg.protocols),
        session_timeout_ms=msg.session_timeout_ms,
        rebalance_timeout_ms=msg.rebalance_timeout_ms,
        group_instance_id=_instance(msg),
        client_id=msg.client_id,
        client_host=msg.client_host,
        reason=msg.reason,
    )


def join_to_proto(r: JoinResponse) -> pb.JoinGroupResponse:
    out = pb.JoinGroupResponse(
        error_code=int(r.error_code),  # type: ignore[arg-type]
        error_message=r.error_message,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name,
        leader=r.leader,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
    )
    for m in r.members:
        member = out.members.add(member_id=m.member_id, metadata=m.metadata)
        if m.group_instance_id is not None:
            member.group_instance_id = m.group_instance_id
    return out


def sync_from_proto(msg: pb.SyncGroupRequest) -> SyncRequest:
    return SyncRequest(
        group_id=msg.group_id,
        generation_id=msg.generation_id,
        member_id=msg.member_id,
        group_instance_id=_instance(msg),
        protocol_type=msg.protocol_type,
        protocol_name=msg.protocol_name,
        assignments=[(a.member_id, bytes(a.assignment)) for a in msg.assignments],
    )


def sync_to_proto(r: SyncResponse) -> pb.SyncGroupResponse:
    return pb.SyncGroupResponse(
        error_code=int(r.error_code),  # type: ignore[arg-type]
        error_message=r.error_message,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name,
        assignment=r.assignment,
    )


def _commit_items(msg: pb.OffsetCommitRequest | pb.TxnOffsetCommitRequest) -> list[CommitItem]:
    return [
        CommitItem(
            TopicPartition(t.name, p.partition),
            p.committed_offset,
            p.committed_leader_epoch,
            p.metadata,
        )
        for t in msg.topics
        for p in t.partitions
    ]


def commit_from_proto(msg: pb.OffsetCommitRequest) -> CommitRequest:
    items = _commit_items(msg)
    return CommitRequest(msg.group_id, msg.generation_id, msg.member_id, _instance(msg), items)


def txn_commit_from_proto(msg: pb.TxnOffsetCommitRequest) -> TxnCommitRequest:
    return TxnCommitRequest(
        transactional_id=msg.transactional_id,
        group_id=msg.group_id,
        producer_id=msg.producer_id,
        producer_epoch=msg.producer_epoch,
        generation_id=msg.generation_id,
        member_id=msg.member_id,
        group_instance_id=_instance(msg),
        items=_commit_items(msg),
    )


def commit_to_proto(
    results: Sequence[tuple[TopicPartition, ErrorCode]],
) -> list[pb.OffsetCommitTopicResponse]:
    out = []
    for topic, rows in groupby(results, key=lambda r: r[0].topic):
        parts = [
            pb.OffsetCommitPartitionResponse(
                partition=tp.partition,
                error_code=int(code),  # type: ignore[arg-type]
                error_message="" if code == ErrorCode.NONE else code.name,
            )
            for tp, code in rows
        ]
        out.append(pb.OffsetCommitTopicResponse(name=topic, partitions=parts))
    return out


def commit_error(
    msg: pb.OffsetCommitRequest | pb.TxnOffsetCommitRequest, code: ErrorCode
) -> list[tuple[TopicPartition, ErrorCode]]:
    return [(TopicPartition(t.name, p.partition), code) for t in msg.topics for p in t.partitions]


def fetch_partitions(msg: pb.OffsetFetchRequest) -> list[TopicPartition] | None:
    if msg.all_topics or not msg.topics:
        return None
    return [TopicPartition(t.name, p) for t in msg.topics for p in t.partitions]


def fetch_to_proto(rows: Sequence[FetchedOffset]) -> list[pb.OffsetFetchTopicResponse]:
    out = []
    for topic, group in groupby(rows, key=lambda r: r.tp.topic):
        parts = [
            pb.OffsetFetchPartitionResponse(
                partition=r.tp.partition,
                committed_offset=r.offset,
                committed_leader_epoch=r.leader_epoch,
                metadata=r.metadata,
                error_code=int(r.error_code),  # type: ignore[arg-type]
                error_message="" if r.error_code == ErrorCode.NONE else r.error_code.name,
            )
            for r in group
        ]
        out.append(pb.OffsetFetchTopicResponse(name=topic, partitions=parts))
    return out


def described_to_proto(d: GroupDescription) -> pb.DescribedGroup:
    out = pb.DescribedGroup(
        error_code=int(d.error_code),  # type: ignore[arg-type]
        group_id=d.group_id,
        group_state=d.state,
        protocol_type=d.protocol_type,
        protocol_data=d.protocol_name,
        generation_id=d.generation_id,
        leader=d.leader,
    )
    for m in d.members:
        member = out.members.add(
            member_id=m.member_id,
            client_id=m.client_id,
            client_host=m.client_host,
            member_metadata=m.metadata,
            member_assignment=m.assignment,
        )
        if m.group_instance_id is not None:
            member.group_instance_id = m.group_instance_id
    return out
