"""The `Coordinator` gRPC service: each group request goes to the shard owning the group's
`__consumer_offsets` partition and waits for its reply. Routing errors (NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) come back in the response's
error_code, as Kafka's do, so clients and the gateway retry or re-route on them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import grpc

from riverlog.common.cluster.convert import find_coordinator_to_proto
from riverlog.common.cluster.image import OFFSETS_TOPIC, group_partition
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2 as pb
from riverlog.v1 import coordinator_pb2_grpc
from riverlog.v1 import transactions_pb2 as txn_pb

from ..coordinator import GroupCoordinator
from ..group.outcome import NOTHING, Outcome
from ..offsets.store import TxnCommitRequest
from ..ownership import Ownership
from . import convert
from .transactions import TransactionRpc

SERVICE_NAME = "riverlog.v1.Coordinator"
Handler = Callable[[GroupCoordinator, Callable[[Any], None]], Outcome]
VerifyTxn = Callable[[str, int, int, TopicPartition, int], Awaitable[ErrorCode]]
"""Asks the transaction coordinator whether a partition is in the producer's ongoing
transaction at this epoch (`PeerCoordinators.verify_in_transaction`)."""


def add_to_server(servicer: CoordinatorServicer, server: grpc.aio.Server) -> None:
    coordinator_pb2_grpc.add_CoordinatorServicer_to_server(servicer, server)


def _code(exc: RiverlogError) -> int:
    return int(exc.code)


class CoordinatorServicer(coordinator_pb2_grpc.CoordinatorServicer):
    """Adapts the RPCs to the shards. Stateless apart from the ownership it routes with."""

    def __init__(
        self,
        ownership: Ownership[GroupCoordinator],
        transactions: TransactionRpc,
        verify_txn: VerifyTxn | None = None,
    ) -> None:
        self.ownership = ownership
        self.transactions = transactions
        self.verify_txn = verify_txn

    async def _on_shard(self, group_id: str, handler: Handler) -> Any:
        """The shard's reply; raises RiverlogError for routing and load errors."""
        return await self.ownership.shard_for(group_id).submit(handler)

    async def FindCoordinator(
        self, request: pb.FindCoordinatorRequest, context: grpc.aio.ServicerContext
    ) -> pb.FindCoordinatorResponse:
        transactions = request.key_type == pb.COORDINATOR_KEY_TYPE_TRANSACTION
        return find_coordinator_to_proto(self.ownership.watcher.image, request.keys, transactions)

    async def InitProducerId(
        self, request: txn_pb.InitProducerIdRequest, context: grpc.aio.ServicerContext
    ) -> txn_pb.InitProducerIdResponse:
        return await self.transactions.init_producer_id(request)

    async def AddPartitionsToTxn(
        self, request: txn_pb.AddPartitionsToTxnRequest, context: grpc.aio.ServicerContext
    ) -> txn_pb.AddPartitionsToTxnResponse:
        return await self.transactions.add_partitions(request)

    async def AddOffsetsToTxn(
        self, request: txn_pb.AddOffsetsToTxnRequest, context: grpc.aio.ServicerContext
    ) -> txn_pb.AddOffsetsToTxnResponse:
        return await self.transactions.add_offsets(request)

    async def EndTxn(
        self, request: txn_pb.EndTxnRequest, context: grpc.aio.ServicerContext
    ) -> txn_pb.EndTxnResponse:
        return await self.transactions.end_txn(request)

    async def DescribeTransactions(
        self, request: txn_pb.DescribeTransactionsRequest, context: grpc.aio.ServicerContext
    ) -> txn_pb.DescribeTransactionsResponse:
        return await self.transactions.describe(request)

    async def ListTransactions(
        self, request: txn_pb.ListTransactionsRequest, context: grpc.aio.ServicerContext
    ) -> txn_pb.ListTransactionsResponse:
        return await self.transactions.list(request)

    async def JoinGroup(
        self, request: pb.JoinGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.JoinGroupResponse:
        join = convert.join_from_proto(request)
        try:
            response = await self._on_shard(join.group_id, lambda c, r: c.groups.join(join, r))
        except RiverlogError as exc:
            return pb.JoinGroupResponse(
                error_code=_code(exc),  # type: ignore[arg-type]
                error_message=exc.message,
                member_id=request.member_id,
            )
        return convert.join_to_proto(response)

    async def SyncGroup(
        self, request: pb.SyncGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.SyncGroupResponse:
        sync = convert.sync_from_proto(request)
        try:
            response = await self._on_shard(sync.group_id, lambda c, r: c.groups.sync(sync, r))
        except RiverlogError as exc:
            return pb.SyncGroupResponse(error_code=_code(exc), error_message=exc.message)  # type: ignore[arg-type]
        return convert.sync_to_proto(response)

    async def Heartbeat(
        self, request: pb.GroupHeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.GroupHeartbeatResponse:
        instance = request.group_instance_id if request.HasField("group_instance_id") else None

        def beat(c: GroupCoordinator, reply: Callable[[Any], None]) -> Outcome:
            reply(
                c.groups.heartbeat(
                    request.group_id, request.member_id, instance, request.generation_id
                )
            )
            return NOTHING

        try:
            code = await self._on_shard(request.group_id, beat)
        except RiverlogError as exc:
            return pb.GroupHeartbeatResponse(error_code=_code(exc), error_message=exc.message)  # type: ignore[arg-type]
        return pb.GroupHeartbeatResponse(error_code=int(code))  # type: ignore[arg-type]

    async def LeaveGroup(
        self, request: pb.LeaveGroupRequest, context: grpc.aio.ServicerContext
    ) -> pb.LeaveGroupResponse:
        members = [
            (
                m.member_id,
                m.group_instance_id if m.HasField("group_instance_id") else None,
                m.reason,
            )
            for m in request.members
        ]

        def leave(c: GroupCoordinator, reply: Callable[[Any], None]) -> Outcome:
            reply([c.groups.leave(request.group_id, mid, iid, why) for mid, iid, why in members])
            return NOTHING

        try:
            codes = await self._on_shard(request.group_id, leave)
        except RiverlogError as exc:
            return pb.LeaveGroupResponse(error_code=_code(exc), error_message=exc.message)  # type: ignore[arg-type]
        out = pb.LeaveGroupResponse()
        for (mid, iid, _), code in zip(members, codes, strict=True):
            row = out.members.add(member_id=mid, error_code=int(code))
            if iid is not None:
                row.group_instance_id = iid
        return out

    async def TxnOffsetCommit(
        self, request: pb.TxnOffsetCommitRequest, context: grpc.aio.ServicerContext
    ) -> pb.TxnOffsetCommitResponse:
        commit = convert.txn_commit_from_proto(request)
        try:
            self.ownership.shard_for(commit.group_id)  # not here or loading: say so first
            refused = await self._verify(commit)
            if refused != ErrorCode.NONE:
                raise RiverlogError(
                    f"the group is not in transaction {commit.transactional_id!r} of producer "
                    f"{commit.producer_id} at epoch {commit.producer_epoch}: {refused.name}",
                    refused,
                )
            results = await self._on_shard(
                commit.group_id, lambda c, r: c.offsets.txn_commit(commit, r)
            )
        except RiverlogError as exc:
            return pb.TxnOffsetCommitResponse(
                error_code=_code(exc),  # type: ignore[arg-type]
                error_message=exc.message,
                topics=convert.commit_to_proto(convert.commit_error(request, exc.code)),
            )
        return pb.TxnOffsetCommitResponse(topics=convert.commit_to_proto(results))

    async def _verify(self, commit: TxnCommitRequest) -> ErrorCode:
        """KIP-890: the group's partition must be in the producer's ongoing transaction at
        this epoch (AddOffsetsToTxn came first), so offsets never wait for a marker that will
        not come, and a fenced or stale producer writes nothing. Malformed requests are left
        to the shard's checks."""
        count = self.ownership.watcher.image.offsets_partitions()
        if self.verify_txn is None or count == 0 or not commit.transactional_id:
            return ErrorCode.NONE
        if commit.producer_id < 0 or commit.producer_epoch < 0:
            return ErrorCode.NONE
        tp = TopicPartition(OFFSETS_TOPIC, group_partition(commit.group_id, count))
        return await self.verify_txn(
            commit.transactional_id,
            commit.producer_id,
            commit.producer_epoch,
            tp,
            self.ownership.config.offsets_commit_timeout_ms,
        )

    async def WriteOffsetsTxnMarker(
        self, request: pb.WriteOffsetsTxnMarkerRequest, context: grpc.aio.ServicerContext
    ) -> pb.WriteOffsetsTxnMarkerResponse:
        def end(c: GroupCoordinator, reply: Callable[[Any], None]) -> Outcome:
            return c.end_transaction(
                request.producer_id,
                request.producer_epoch,
                request.committed,
                request.coordinator_epoch,
                reply,
            )

        try:
            code = await self.ownership.shard_at(request.partition).submit(end)
        except RiverlogError as exc:
            return pb.WriteOffsetsTxnMarkerResponse(
                error_code=_code(exc),  # type: ignore[arg-type]
                error_message=exc.message,
            )
        return pb.WriteOffsetsTxnMarkerResponse(
            error_code=int(code),  # type: ignore[arg-type]
            error_message="" if code == ErrorCode.NONE else code.name,
        )

    async def AbortTransaction(
        self, request: pb.AbortTransactionRequest, context: grpc.aio.ServicerContext
    ) -> pb.AbortTransactionResponse:
        return await self.transactions.abort(request)

    async def OffsetCommit(
        self, request: pb.OffsetCommitRequest, context: grpc.aio.ServicerContext
    ) -> pb.OffsetCommitResponse:
        commit = convert.commit_from_proto(request)
        try:
            results = await self._on_shard(
                commit.group_id, lambda c, r: c.offsets.commit(commit, r)
            )
        except RiverlogError as exc:
            return pb.OffsetCommitResponse(
                error_code=_code(exc),  # type: ignore[arg-type]
                error_message=exc.message,
                topics=convert.commit_to_proto(convert.commit_error(request, exc.code)),
            )
        return pb.OffsetCommitResponse(topics=convert.commit_to_proto(results))

    async def OffsetFetch(
        self, request: pb.OffsetFetchRequest, context: grpc.aio.ServicerContext
    ) -> pb.OffsetFetchResponse:
        partitions = convert.fetch_partitions(request)
        stable = request.require_stable

        def fetch(c: GroupCoordinator, reply: Callable[[Any], None]) -> Outcome:
            reply(c.offsets.fetch(request.group_id, partitions, stable))
            return NOTHING

        try:
            rows = await self._on_shard(request.group_id, fetch)
        except RiverlogError as exc:
            return pb.OffsetFetchResponse(error_code=_code(exc), error_message=exc.message)  # type: ignore[arg-type]
        return pb.OffsetFetchResponse(topics=convert.fetch_to_proto(rows))

    async def ListGroups(
        self, request: pb.ListGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListGroupsResponse:
        out = pb.ListGroupsResponse()
        states = list(request.states_filter)

        def listing(c: GroupCoordinator, reply: Callable[[Any], None]) -> Outcome:
            reply(c.list_groups(states))
            return NOTHING

        if any(not s.ready for s in self.ownership.shards.values()):
            out.error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS  # type: ignore[assignment]
            out.error_message = "some partitions are still loading"
        for shard in self.ownership.ready_shards():
            try:
                rows = await shard.submit(listing)
            except RiverlogError:
                continue
            for group_id, protocol_type, state in rows:
                out.groups.add(group_id=group_id, protocol_type=protocol_type, group_state=state)
        return out

    async def _each_group(
        self,
        groups: Sequence[str],
        handler: Callable[[str], Handler],
        out: pb.DescribeGroupsResponse | pb.DeleteGroupsResponse,
    ) -> list[tuple[str, Any]]:
        """`handler(group_id)` on each group's shard in turn: (group id, its reply, or the
        RiverlogError that group got). A request for one group (the gateway's per-group form)
        also carries that error response-wide in `out`, since the gateway retries on it."""
        outcomes: list[tuple[str, Any]] = []
        for group_id in groups:
            try:
                outcomes.append((group_id, await self._on_shard(group_id, handler(group_id))))
            except RiverlogError as exc:
                if len(groups) == 1:
                    out.error_code, out.error_message = _code(exc), exc.message  # type: ignore[assignment]
                outcomes.append((group_id, exc))
        return outcomes

    async def DescribeGroups(
        self, request: pb.DescribeGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DescribeGroupsResponse:
        def describe(group_id: str) -> Handler:
            def run(c: GroupCoordinator, reply: Callable[[Any], None]) -> Outcome:
                reply(c.describe(group_id))
                return NOTHING

            return run

        out = pb.DescribeGroupsResponse()
        for group_id, described in await self._each_group(request.groups, describe, out):
            if isinstance(described, RiverlogError):
                out.groups.add(
                    group_id=group_id, error_code=_code(described), error_message=described.message
                )
            else:
                out.groups.append(convert.described_to_proto(described))
        return out

    async def DeleteGroups(
        self, request: pb.DeleteGroupsRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteGroupsResponse:
        def delete(group_id: str) -> Handler:
            return lambda c, reply: c.delete_group(group_id, reply)

        out = pb.DeleteGroupsResponse()
        for group_id, outcome in await self._each_group(request.groups, delete, out):
            code: ErrorCode = outcome.code if isinstance(outcome, RiverlogError) else outcome
            out.results.add(
                group_id=group_id,
                error_code=int(code),
                error_message="" if code == ErrorCode.NONE else code.name,
            )
        return out
