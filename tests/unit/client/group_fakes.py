"""An in-process fake of a group coordinator for the SDK's unit tests: `FakeGroupCoordinator`
implements the client's `GroupApi` with Kafka's classic-protocol semantics (member ids handed
out with MEMBER_ID_REQUIRED, a JoinGroup that waits for the known members up to the rebalance
timeout, a leader whose SyncGroup assignment the followers wait for, generations fencing
heartbeats and commits, static members replaced without a rebalance), and `GroupGateway`
serves the same logic as the gateway's group RPCs so the real gRPC path is tested too.

Failure hooks: `join_errors`, `heartbeat_errors`, `commit_errors`, `fetch_errors` queue codes
for the next calls. `calls` records (rpc, member id) in order. All state is under one condition
variable.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from client_fakes import FakeGateway

from riverlog.client.consumer.group.api import (
    CommitRequest,
    CommittedOffset,
    GroupMember,
    JoinMember,
    JoinRequest,
    JoinResult,
    SyncResult,
)
from riverlog.client.consumer.group.grpc_api import join_result_from_proto
from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2 as pb


@dataclass
class Member:
    member_id: str
    instance_id: str | None
    protocols: list[tuple[str, bytes]]
    rebalance_timeout_ms: int
    joined_round: int = -1
    assignment: bytes = b""
    client_id: str = ""


@dataclass
class FakeGroupCoordinator:
    join_wait_s: float = 0.5  # how long a rebalance waits for members that have not rejoined
    cond: threading.Condition = field(default_factory=threading.Condition)
    members: dict[str, Member] = field(default_factory=dict)
    pending: set[str] = field(default_factory=set)
    state: str = "Empty"
    generation: int = 0
    leader: str = ""
    protocol: str = ""
    round: int = 0
    round_started: float = 0.0
    offsets: dict[TopicPartition, tuple[int, str]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    join_errors: deque[ErrorCode] = field(default_factory=deque)
    heartbeat_errors: deque[ErrorCode] = field(default_factory=deque)
    commit_errors: deque[ErrorCode] = field(default_factory=deque)
    fetch_errors: deque[ErrorCode] = field(default_factory=deque)
    owners: list[dict[str, list[TopicPartition]]] = field(default_factory=list)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # ---- helpers ---------------------------------------------------------------------------

    def _start_rebalance(self) -> None:
        if self.state != "PreparingRebalance":
            self.state = "PreparingRebalance"
            self.round += 1
            self.round_started = time.monotonic()
            self.cond.notify_all()

    def _complete_join(self) -> None:
        """Everyone known rejoined, or the wait ran out: drop the stragglers, new generation."""
        for mid in [m for m, v in self.members.items() if v.joined_round != self.round]:
            del self.members[mid]
        self.generation += 1
        if not self.members:
            self.state = "Empty"
            return
        self.state = "CompletingRebalance"
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        names = [n for n, _ in self.members[self.leader].protocols]
        self.protocol = next(
            n for n in names if all(n in dict(m.protocols) for m in self.members.values())
        )
        for m in self.members.values():
            m.assignment = b""
        self.cond.notify_all()

    def _result(self, mid: str) -> JoinResult:
        leader = mid == self.leader
        return JoinResult(
            ErrorCode.NONE,
            self.generation,
            self.protocol,
            self.leader,
            mid,
            tuple(
                JoinMember(m.member_id, m.instance_id, dict(m.protocols)[self.protocol])
                for m in self.members.values()
            )
            if leader
            else (),
        )

    # ---- GroupApi ----------------------------------------------------------------------------

    def join_group(self, request: JoinRequest, timeout_s: float) -> JoinResult:
        with self.cond:
            self.calls.append(("join", request.member_id))
            if self.join_errors:
                return JoinResult(self.join_errors.popleft())
            mid = request.member_id
            static = request.group_instance_id
            if static is not None:
                old = next((m for m in self.members.values() if m.instance_id == static), None)
                if old is not None and not mid:
                    # a static member coming back: a new id, same assignment, no rebalance
                    del self.members[old.member_id]
                    old.member_id = mid = f"{static}-{next(self.ids)}"
                    self.members[mid] = old
                    if self.leader == "" or self.leader not in self.members:
                        self.leader = mid
                    if self.state == "Stable":
                        return self._result(mid)
                elif not mid:
                    mid = f"{static}-{next(self.ids)}"
                    self.pending.add(mid)
            if not mid:
                mid = f"member-{next(self.ids)}"
                self.pending.add(mid)
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=mid)
            if mid not in self.members and mid not in self.pending:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID)
            self.pending.discard(mid)
            member = self.members.get(mid)
            if member is None:
                member = self.members[mid] = Member(
                    mid, static, list(request.protocols), request.rebalance_timeout_ms
                )
            else:
                member.protocols = list(request.protocols)
            self._start_rebalance()
            member.joined_round = self.round
            my_round = self.round
            while True:
                if self.state == "PreparingRebalance" and self.round == my_round:
                    everyone = all(m.joined_round == self.round for m in self.members.values())
                    waited = time.monotonic() - self.round_started
                    if everyone or waited >= self.join_wait_s:
                        self._complete_join()
                if self.round != my_round or self.state != "PreparingRebalance":
                    break
                self.cond.wait(0.02)
            if mid not in self.members:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID)
            return self._result(mid)

    def _check(self, member: GroupMember) -> ErrorCode:
        m = self.members.get(member.member_id)
        if m is None:
            if member.group_instance_id is not None and any(
                x.instance_id == member.group_instance_id for x in self.members.values()
            ):
                return ErrorCode.FENCED_INSTANCE_ID
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.generation_id != self.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def sync_group(
        self,
        member: GroupMember,
        protocol_type: str,
        assignments: Mapping[str, bytes],
        timeout_s: float,
    ) -> SyncResult:
        with self.cond:
            self.calls.append(("sync", member.member_id))
            code = self._check(member)
            if code != ErrorCode.NONE:
                return SyncResult(code)
            if self.state == "PreparingRebalance":
                return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
            generation = self.generation
            if member.member_id == self.leader and self.state == "CompletingRebalance":
                for mid, data in assignments.items():
                    if mid in self.members:
                        self.members[mid].assignment = data
                self.state = "Stable"
                self._record_owners()
                self.cond.notify_all()
            deadline = time.monotonic() + timeout_s
            while self.state == "CompletingRebalance" and self.generation == generation:
                if time.monotonic() > deadline:
                    return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
                self.cond.wait(0.02)
            if self.generation != generation or self.state != "Stable":
                return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
            m = self.members.get(member.member_id)
            if m is None:
                return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
            return SyncResult(ErrorCode.NONE, m.assignment, self.protocol)

    def _record_owners(self) -> None:
        from riverlog.common.assignors import decode_assignment

        self.owners.append(
            {
                mid: decode_assignment(m.assignment).partitions if m.assignment else []
                for mid, m in self.members.items()
            }
        )

    def heartbeat(self, member: GroupMember, timeout_s: float) -> ErrorCode:
        with self.cond:
            self.calls.append(("heartbeat", member.member_id))
            if self.heartbeat_errors:
                return self.heartbeat_errors.popleft()
            code = self._check(member)
            if code != ErrorCode.NONE:
                return code
            if self.state == "PreparingRebalance":
                return ErrorCode.REBALANCE_IN_PROGRESS
            return ErrorCode.NONE

    def leave_group(self, member: GroupMember, reason: str, timeout_s: float) -> ErrorCode:
        with self.cond:
            self.calls.append(("leave", member.member_id))
            if member.member_id not in self.members:
                return ErrorCode.UNKNOWN_MEMBER_ID
            del self.members[member.member_id]
            if self.members:
                self._start_rebalance()
            else:
                self.state = "Empty"
            return ErrorCode.NONE

    def offset_commit(
        self, request: CommitRequest, timeout_s: float
    ) -> dict[TopicPartition, ErrorCode]:
        with self.cond:
            member = request.member
            self.calls.append(("commit", member.member_id))
            if self.commit_errors:
                return dict.fromkeys(request.offsets, self.commit_errors.popleft())
            if member.generation_id < 0 and not member.member_id:
                code = ErrorCode.NONE if not self.members else ErrorCode.ILLEGAL_GENERATION
            else:
                code = self._check(member)
                if code == ErrorCode.NONE and self.state == "CompletingRebalance":
                    code = ErrorCode.REBALANCE_IN_PROGRESS
            if code == ErrorCode.NONE:
                for tp, value in request.offsets.items():
                    self.offsets[tp] = (value.offset, value.metadata)
            return dict.fromkeys(request.offsets, code)

    def offset_fetch(
        self,
        group_id: str,
        partitions: Sequence[TopicPartition],
        timeout_s: float,
        require_stable: bool = False,
    ) -> dict[TopicPartition, CommittedOffset]:
        with self.cond:
            self.calls.append(("fetch", "stable" if require_stable else ""))
            if self.fetch_errors:
                code = self.fetch_errors.popleft()
                return {tp: CommittedOffset(-1, error_code=code) for tp in partitions}
            out: dict[TopicPartition, CommittedOffset] = {}
            for tp in partitions:
                offset, metadata = self.offsets.get(tp, (-1, ""))
                out[tp] = CommittedOffset(offset, metadata)
            return out

    def close(self) -> None:
        return None

    def count(self, rpc: str) -> int:
        with self.cond:
            return sum(1 for name, _ in self.calls if name == rpc)


class GroupGateway(FakeGateway):
    """The FakeGateway plus the gateway's group RPCs, served by one FakeGroupCoordinator."""

    def __init__(self, group: FakeGroupCoordinator | None = None) -> None:
        super().__init__()
        self.group = group or FakeGroupCoordinator()

    def JoinGroup(self, request: pb.JoinGroupRequest, context: object) -> pb.JoinGroupResponse:
        result = self.group.join_group(
            JoinRequest(
                request.group_id,
                request.member_id,
                request.group_instance_id if request.HasField("group_instance_id") else None,
                request.session_timeout_ms,
                request.rebalance_timeout_ms,
                request.protocol_type,
                [(p.name, p.metadata) for p in request.protocols],
            ),
            30.0,
        )
        response = pb.JoinGroupResponse(
            error_code=result.error_code,  # type: ignore[arg-type]
            generation_id=result.generation_id,
            protocol_name=result.protocol_name,
            leader=result.leader,
            member_id=result.member_id,
            members=[
                pb.JoinGroupResponseMember(member_id=m.member_id, metadata=m.metadata)
                for m in result.members
            ],
        )
        assert join_result_from_proto(response).member_id == result.member_id
        return response

    @staticmethod
    def _member(r: pb.SyncGroupRequest | pb.GroupHeartbeatRequest) -> GroupMember:
        instance = r.group_instance_id if r.HasField("group_instance_id") else None
        name = r.protocol_name if isinstance(r, pb.SyncGroupRequest) else ""
        return GroupMember(r.group_id, r.member_id, r.generation_id, instance, name)

    def SyncGroup(self, request: pb.SyncGroupRequest, context: object) -> pb.SyncGroupResponse:
        result = self.group.sync_group(
            self._member(request),
            request.protocol_type,
            {a.member_id: a.assignment for a in request.assignments},
            30.0,
        )
        return pb.SyncGroupResponse(
            error_code=result.error_code,  # type: ignore[arg-type]
            assignment=result.assignment,
            protocol_name=result.protocol_name,
        )

    def Heartbeat(
        self, request: pb.GroupHeartbeatRequest, context: object
    ) -> pb.GroupHeartbeatResponse:
        code = self.group.heartbeat(self._member(request), 5.0)
        return pb.GroupHeartbeatResponse(error_code=code)  # type: ignore[arg-type]

    def LeaveGroup(self, request: pb.LeaveGroupRequest, context: object) -> pb.LeaveGroupResponse:
        codes = [
            self.group.leave_group(GroupMember(request.group_id, m.member_id), m.reason, 5.0)
            for m in request.members
        ]
        return pb.LeaveGroupResponse(
            members=[
                pb.LeavingMemberResponse(member_id=m.member_id, error_code=c)  # type: ignore[arg-type]
                for m, c in zip(request.members, codes, strict=True)
            ]
        )

    def OffsetCommit(
        self, request: pb.OffsetCommitRequest, context: object
    ) -> pb.OffsetCommitResponse:
        from riverlog.client.consumer.group.api import OffsetAndMetadata

        instance = request.group_instance_id if request.HasField("group_instance_id") else None
        member = GroupMember(request.group_id, request.member_id, request.generation_id, instance)
        offsets = {
            TopicPartition(t.name, p.partition): OffsetAndMetadata(p.committed_offset, p.metadata)
            for t in request.topics
            for p in t.partitions
        }
        results = self.group.offset_commit(CommitRequest(member, offsets), 5.0)
        topics: dict[str, list[pb.OffsetCommitPartitionResponse]] = {}
        for tp, code in results.items():
            topics.setdefault(tp.topic, []).append(
                pb.OffsetCommitPartitionResponse(partition=tp.partition, error_code=code)  # type: ignore[arg-type]
            )
        return pb.OffsetCommitResponse(
            topics=[pb.OffsetCommitTopicResponse(name=t, partitions=p) for t, p in topics.items()]
        )

    def OffsetFetch(
        self, request: pb.OffsetFetchRequest, context: object
    ) -> pb.OffsetFetchResponse:
        tps = [TopicPartition(t.name, p) for t in request.topics for p in t.partitions]
        if request.all_topics:
            with self.group.cond:
                tps = sorted(self.group.offsets)
        found = self.group.offset_fetch(request.group_id, tps, 5.0, request.require_stable)
        topics: dict[str, list[pb.OffsetFetchPartitionResponse]] = {}
        for tp, c in found.items():
            topics.setdefault(tp.topic, []).append(
                pb.OffsetFetchPartitionResponse(
                    partition=tp.partition,
                    committed_offset=c.offset,
                    committed_leader_epoch=-1,
                    metadata=c.metadata,
                )
            )
        return pb.OffsetFetchResponse(
            topics=[pb.OffsetFetchTopicResponse(name=t, partitions=p) for t, p in topics.items()]
        )


class AdminGroupGateway(GroupGateway):
    """GroupGateway plus ListGroups, DescribeGroups and DeleteGroups of its one group ("g"
    unless renamed), for the admin client and the CLI."""

    group_id = "g"

    def ListGroups(self, request: pb.ListGroupsRequest, context: object) -> pb.ListGroupsResponse:
        g = self.group
        with g.cond:
            if g.state == "Dead" or (g.state == "Empty" and not g.offsets and not g.generation):
                return pb.ListGroupsResponse()
            state = g.state
        if request.states_filter and state not in request.states_filter:
            return pb.ListGroupsResponse()
        return pb.ListGroupsResponse(
            groups=[
                pb.ListedGroup(group_id=self.group_id, protocol_type="consumer", group_state=state)
            ]
        )

    def DescribeGroups(
        self, request: pb.DescribeGroupsRequest, context: object
    ) -> pb.DescribeGroupsResponse:
        g = self.group
        out = []
        with g.cond:
            for gid in request.groups:
                if gid != self.group_id or g.state == "Dead":
                    out.append(pb.DescribedGroup(group_id=gid, group_state="Dead"))
                    continue
                members = []
                for m in g.members.values():
                    member = pb.DescribedGroupMember(
                        member_id=m.member_id,
                        client_id=m.client_id or "cli",
                        client_host="/127.0.0.1",
                        member_assignment=m.assignment,
                    )
                    if m.instance_id is not None:
                        member.group_instance_id = m.instance_id
                    members.append(member)
                out.append(
                    pb.DescribedGroup(
                        group_id=gid,
                        group_state=g.state,
                        protocol_type="consumer",
                        protocol_data=g.protocol,
                        generation_id=g.generation,
                        leader=g.leader,
                        members=members,
                    )
                )
        return pb.DescribeGroupsResponse(groups=out)

    def DeleteGroups(
        self, request: pb.DeleteGroupsRequest, context: object
    ) -> pb.DeleteGroupsResponse:
        g = self.group
        results = []
        with g.cond:
            for gid in request.groups:
                if gid != self.group_id or g.state == "Dead":
                    code = ErrorCode.GROUP_ID_NOT_FOUND
                elif g.members:
                    code = ErrorCode.NON_EMPTY_GROUP
                else:
                    code = ErrorCode.NONE
                    g.state = "Dead"
                    g.offsets.clear()
                results.append(pb.DeletableGroupResult(group_id=gid, error_code=code))  # type: ignore[arg-type]
        return pb.DeleteGroupsResponse(results=results)
