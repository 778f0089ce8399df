"""A consumer-group member written against the raw gRPC API (no SDK), as a client in any
language would: JoinGroup (with the MEMBER_ID_REQUIRED round trip), SyncGroup with no
assignment so the coordinator assigns server-side, and a heartbeat thread that rejoins on
REBALANCE_IN_PROGRESS. Each member records what it was assigned in each generation."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import grpc

from riverlog.common.assignors import Subscription, decode_assignment, encode_subscription
from riverlog.common.errors import ErrorCode
from riverlog.common.rpc.channel import sync_channel
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2 as pb
from riverlog.v1 import gateway_pb2_grpc

E = ErrorCode
RETRY = {E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_LOAD_IN_PROGRESS}


def stub_for(address: str) -> gateway_pb2_grpc.GatewayStub:
    return gateway_pb2_grpc.GatewayStub(sync_channel(address))  # type: ignore[no-untyped-call]


@dataclass
class RawMember:
    address: str
    group: str
    topics: list[str]
    instance_id: str | None = None
    session_ms: int = 2_000
    protocol: str = "range"
    member_id: str = ""
    generation: int = -1
    assignment: list[TopicPartition] = field(default_factory=list)
    history: dict[int, list[TopicPartition]] = field(default_factory=dict)
    joins: int = 0

    def __post_init__(self) -> None:
        self.stub = stub_for(self.address)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def _join_request(self) -> pb.JoinGroupRequest:
        metadata = encode_subscription(Subscription(self.topics))
        req = pb.JoinGroupRequest(
            group_id=self.group,
            session_timeout_ms=self.session_ms,
            rebalance_timeout_ms=5_000,
            member_id=self.member_id,
            protocol_type="consumer",
            protocols=[pb.JoinGroupProtocol(name=self.protocol, metadata=metadata)],
            client_id="raw-member",
        )
        if self.instance_id is not None:
            req.group_instance_id = self.instance_id
        return req

    def join(self, deadline_s: float = 30.0) -> pb.JoinGroupResponse:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            response = self.stub.JoinGroup(self._join_request(), timeout=20)
            code = E(response.error_code)
            if code == E.MEMBER_ID_REQUIRED:
                self.member_id = response.member_id
                continue
            if code == E.UNKNOWN_MEMBER_ID:
                self.member_id = ""
                continue
            if code in RETRY or code == E.REBALANCE_IN_PROGRESS:
                time.sleep(0.1)
                continue
            if code != E.NONE:
                raise AssertionError(f"JoinGroup failed: {code.name} {response.error_message}")
            self.joins += 1
            self.member_id = response.member_id
            self.generation = response.generation_id
            return response
        raise AssertionError("JoinGroup did not succeed in time")

    def sync(self) -> ErrorCode:
        req = pb.SyncGroupRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id
        )
        if self.instance_id is not None:
            req.group_instance_id = self.instance_id
        response = self.stub.SyncGroup(req, timeout=20)
        code = E(response.error_code)
        if code == E.NONE:
            self.assignment = decode_assignment(response.assignment).partitions
            self.history[self.generation] = self.assignment
        return code

    def rebalance(self) -> None:
        while not self._stop.is_set():
            self.join()
            if self.sync() == E.NONE:
                return

    def heartbeat(self) -> ErrorCode:
        req = pb.GroupHeartbeatRequest(
            group_id=self.group, generation_id=self.generation, member_id=self.member_id
        )
        if self.instance_id is not None:
            req.group_instance_id = self.instance_id
        return E(self.stub.Heartbeat(req, timeout=10).error_code)

    def commit(
        self, offsets: dict[TopicPartition, int], generation: int | None = None
    ) -> list[ErrorCode]:
        topics: dict[str, list[pb.OffsetCommitPartition]] = {}
        for tp, offset in offsets.items():
            topics.setdefault(tp.topic, []).append(
                pb.OffsetCommitPartition(
                    partition=tp.partition, committed_offset=offset, metadata="m"
                )
            )
        req = pb.OffsetCommitRequest(
            group_id=self.group,
            generation_id=self.generation if generation is None else generation,
            member_id=self.member_id,
            topics=[pb.OffsetCommitTopic(name=t, partitions=p) for t, p in topics.items()],
        )
        response = self.stub.OffsetCommit(req, timeout=20)
        return [E(p.error_code) for t in response.topics for p in t.partitions]

    # --- background membership --------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"member-{self.group}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.rebalance()
            while not self._stop.wait(0.2):
                try:
                    code = self.heartbeat()
                except grpc.RpcError:
                    continue  # a coordinator moving: keep heartbeating
                if code in (E.REBALANCE_IN_PROGRESS, E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID):
                    self.rebalance()
        except grpc.RpcError as exc:
            if not self._stop.is_set():
                self.error = exc
        except BaseException as exc:
            self.error = exc

    def stop(self, leave: bool = True) -> None:
        """Stop the heartbeat thread; with `leave`, send LeaveGroup (a clean close)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if leave and self.member_id:
            member = pb.LeavingMember(member_id=self.member_id)
            self.stub.LeaveGroup(
                pb.LeaveGroupRequest(group_id=self.group, members=[member]), timeout=10
            )


def describe(address: str, group: str) -> pb.DescribedGroup:
    response = stub_for(address).DescribeGroups(
        pb.DescribeGroupsRequest(groups=[group]), timeout=20
    )
    return response.groups[0]


def wait_until(predicate, timeout_s: float = 60.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")
