"""The Gateway gRPC servicer: a thin adapter from the client API to the request families.

Each method takes the call's `RequestContext` (`request_context.py`), converts the message,
awaits the family, and converts back; produce and fetch paths go through the quota checks first
and put the throttle time in the response (`quotas.py`), every other unary method gets the
request quota from the server interceptor in `request_quota.py` (`interceptors()` makes it for
the server). Whole-request errors are raised as RiverlogError and mapped to a gRPC status by the
shared interceptor; on streams they become per-partition errors instead, so one bad request
does not end the stream. Administration RPCs (passed to the metadata service) are delegated to
the `AdminForwarder` of `admin.py`, consumer-group RPCs to the `GroupForwarder` of `groups.py`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

import grpc

from riverlog.common.acl.model import AclOperation, ResourceType
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.grants import GrantOperation
from riverlog.common.metrics.rpc import RequestTimer
from riverlog.common.produce_request_parse import ParsedProduceRequest, parse_produce_request
from riverlog.common.producer_ids import ProducerIdAllocator
from riverlog.common.rpc.convert import (
    acks_from_proto,
    error_code_to_proto,
    isolation_level_from_proto,
)
from riverlog.common.types import Acks, TopicPartition
from riverlog.v1 import (
    acls_pb2,
    admin_pb2,
    coordinator_pb2,
    data_pb2,
    gateway_pb2,
    gateway_pb2_grpc,
    transactions_pb2,
)

from ..admin import Admin
from ..auth import Authenticator
from ..authorization import GatewayAuthorizer, denied
from ..config import GatewayConfig
from ..context import RequestContext
from ..direct_access import DataAccess
from ..fetch import Fetcher, FetchOptions, FetchPart, FetchPartResult
from ..groups import GroupRouter
from ..log_dirs import LogDirs
from ..offsets import Offsets
from ..peers.metadata import MetadataPeer
from ..produce import ProduceOptions, ProducePart, ProducePartResult, Producer, StreamOrder
from ..quotas import GatewayQuotas
from ..reassignment_progress import ReassignmentProgress
from ..records import EncodedProduceRecords, PlainRecords
from ..streams import Pipeline
from ..traffic import fetched, fetched_plain, produced, produced_plain
from . import convert
from .admin import AdminForwarder
from .authorization import AuthorizationInterceptor
from .fetch_stream import FetchPushes
from .groups import GroupForwarder
from .request_context import RequestContexts
from .request_quota import RequestQuotaInterceptor, after_fetch, before_fetch, produce_size
from .transactions import TransactionForwarder

log = logging.getLogger(__name__)

SERVICE_NAME = "riverlog.v1.Gateway"

ProduceCall = Callable[
    [RequestContext, ProduceOptions, Sequence[ProducePart]], Awaitable[list[ProducePartResult]]
]
FetchCall = Callable[
    [RequestContext, FetchOptions, Sequence[FetchPart]], Awaitable[list[FetchPartResult]]
]


@dataclass(frozen=True, slots=True)
class Families:
    """The request families the servicer delegates to (wired by `app`)."""

    config: GatewayConfig
    producer: Producer
    fetcher: Fetcher
    offsets: Offsets
    records: PlainRecords
    admin: Admin
    metadata: MetadataPeer
    producer_ids: ProducerIdAllocator | None = None
    quotas: GatewayQuotas | None = None
    auth: Authenticator | None = None
    groups: GroupRouter | None = None
    progress: ReassignmentProgress | None = None
    log_dirs: LogDirs | None = None
    authz: GatewayAuthorizer | None = None
    direct: DataAccess | None = None


_GRANT_OPERATIONS: Final = {
    gateway_pb2.DATA_ACCESS_READ: GrantOperation.READ,
    gateway_pb2.DATA_ACCESS_WRITE: GrantOperation.WRITE,
}


class GatewayServicer(gateway_pb2_grpc.GatewayServicer):
    """One per gateway process; grpc calls its methods from the event loop, one task per call.
    Owns the admin and group forwarders it delegates those RPCs to."""

    METRICS_TIMED_INSIDE = frozenset({"Produce", "Fetch"})  # per request, streams included

    def __init__(self, families: Families) -> None:
        self.f = families
        self.contexts = RequestContexts(families.config, families.auth)
        self.admin = AdminForwarder(families.admin, families.metadata, self.contexts)
        self.groups = GroupForwarder(families.groups, families.config, self.contexts)
        self.transactions = TransactionForwarder(families.groups, self.contexts)
        self._produce_timer = RequestTimer(SERVICE_NAME, "Produce")
        self._fetch_timer = RequestTimer(SERVICE_NAME, "Fetch")

    def interceptors(self) -> list[grpc.aio.ServerInterceptor]:
        """The server interceptors this servicer's calls need: the request quota, then (inside
        it, with the context it made) the ACL checks."""
        out: list[grpc.aio.ServerInterceptor] = [
            RequestQuotaInterceptor(self.contexts, self.f.quotas)
        ]
        if self.f.authz is not None:
            out.append(AuthorizationInterceptor(self.contexts, self.f.authz))
        return out

    def _context(self, method: str, context: grpc.aio.ServicerContext) -> RequestContext:
        return self.contexts.of_call(method, context)

    # --- record batches -----------------------------------------------------------------------

    async def Produce(
        self,
        request: data_pb2.ProduceRequest | ParsedProduceRequest,
        context: grpc.aio.ServicerContext,
    ) -> data_pb2.ProduceResponse:
        ctx = self._context("Produce", context)
        _, results, throttle = await self._produce(ctx, request, self.f.producer.produce)
        response = convert.produce_to_proto(results, request.correlation_id)
        response.throttle_time_ms = throttle
        return response

    async def ProduceStream(
        self,
        request_iterator: AsyncIterator[data_pb2.ProduceRequest | ParsedProduceRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[data_pb2.ProduceResponse]:
        stream = self._context("ProduceStream", context)
        # Its requests run in tasks of their own: a partition without idempotence is re-sent
        # after a stale route only while no later request of the stream names it.
        order = StreamOrder()

        async def handle(
            request: data_pb2.ProduceRequest | ParsedProduceRequest,
        ) -> data_pb2.ProduceResponse | None:
            ctx = self.contexts.of_stream_request(stream)
            options, results, throttle = await ctx.work.run(
                self._produce(ctx, request, self.f.producer.produce_or_fail, order)
            )
            if options.acks == Acks.NONE:
                return None  # acks=0 on a stream: no answer, as Kafka (and the storage nodes)
            response = convert.produce_to_proto(results, request.correlation_id)
            response.throttle_time_ms = throttle
            return response

        pipeline = Pipeline(handle, self.f.config.max_in_flight_requests_per_connection)
        async for response in pipeline.run(request_iterator):
            yield response

    async def _produce(
        self,
        ctx: RequestContext,
        request: data_pb2.ProduceRequest | ParsedProduceRequest,
        produce: ProduceCall,
        order: StreamOrder | None = None,
    ) -> tuple[ProduceOptions, list[ProducePartResult], int]:
        """`produce` the request between the quota checks: its options, results and the
        throttle time to answer with. With a stream's `order`, the request arrives there
        before any await and `Producer.produce_or_fail` produces it with its number: the
        stream's requests are numbered as they came, however long each waits for its quota."""
        start = RequestTimer.start()
        quotas = self.f.quotas
        throttle = 0
        options, parts = convert.produce_from_proto(request)
        authz = self.f.authz
        refused: list[ProducePart] = []
        if authz is not None and authz.active:  # nothing is written to a refused partition
            parts, refused = authz.split(ctx, AclOperation.WRITE, parts, lambda p: p.tp.topic)
        if order is not None:
            number = order.arrived([p.tp for p in parts])
            produce = functools.partial(self.f.producer.produce_or_fail, order=order, number=number)
        if quotas is not None:
            throttle = await quotas.before_produce(ctx, produce_size(parts))
        results = await produce(ctx, options, parts) if parts or not refused else []
        if refused:
            results = _in_order(
                [p.tp for p in (*parts, *refused)],
                results,
                [
                    ProducePartResult.failed(p, _refusal(ctx, AclOperation.WRITE, p.tp))
                    for p in refused
                ],
            )
        produced(parts, results)
        if quotas is not None:
            throttle = quotas.after_request(ctx, throttle, ctx.work.elapsed_ns())
        self._produce_timer.done(start)
        return options, results, throttle

    async def Fetch(
        self, request: data_pb2.FetchRequest, context: grpc.aio.ServicerContext
    ) -> data_pb2.FetchResponse:
        ctx = self._context("Fetch", context)
        return await self._fetch(ctx, request, self.f.fetcher.fetch)

    async def FetchStream(
        self,
        request_iterator: AsyncIterator[data_pb2.FetchRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[data_pb2.FetchResponse]:
        stream = self._context("FetchStream", context)
        fetch = self.f.fetcher.fetch_or_fail

        def new_context() -> RequestContext:
            return self.contexts.of_stream_request(stream)

        async def fetch_results(
            ctx: RequestContext, request: data_pb2.FetchRequest
        ) -> tuple[list[FetchPartResult], int]:
            return await self._fetch_results(ctx, request, fetch)

        async def handle(request: data_pb2.FetchRequest) -> data_pb2.FetchResponse:
            ctx = new_context()
            if request.forgotten_partitions and not request.partitions:
                pushes.claim(request)  # only stops pushes: nothing to fetch
                return data_pb2.FetchResponse(correlation_id=request.correlation_id)
            if request.push_credit <= 0 and not pushes.table.running():
                return await ctx.work.run(self._fetch(ctx, request, fetch))
            claimed = pushes.claim(request)
            start = RequestTimer.start()
            results, throttle = await ctx.work.run(self._fetch_results(ctx, request, fetch))
            started = pushes.answer(request, claimed, results, throttle)
            wire = convert.fetch_to_wire(results, request.correlation_id, throttle, started)
            self._fetch_timer.done(start)
            return _serialized(wire)

        pipeline = Pipeline(handle, self.f.config.max_in_flight_requests_per_connection)
        pushes = FetchPushes(
            new_context, fetch_results, lambda wire: pipeline.push(_serialized(wire))
        )
        try:
            async for response in pipeline.run(request_iterator):
                yield response
        finally:
            await pushes.table.close()

    async def _fetch(
        self, ctx: RequestContext, request: data_pb2.FetchRequest, fetch: FetchCall
    ) -> data_pb2.FetchResponse:
        """`fetch` the request between the quota checks; answered empty while the client is
        held (it waits, then asks again)."""
        start = RequestTimer.start()
        results, throttle = await self._fetch_results(ctx, request, fetch)
        wire = convert.fetch_to_wire(results, request.correlation_id, throttle)
        self._fetch_timer.done(start)
        return _serialized(wire)

    async def _fetch_results(
        self, ctx: RequestContext, request: data_pb2.FetchRequest, fetch: FetchCall
    ) -> tuple[list[FetchPartResult], int]:
        """`fetch` the request between the quota checks: the results and the throttle time to
        answer with; no results while the client is held."""
        quotas = self.f.quotas
        if quotas is not None:
            held = await before_fetch(quotas, ctx, request)
            if held > 0:
                return [], held
        options, parts = convert.fetch_from_proto(request)
        authz = self.f.authz
        refused: list[FetchPart] = []
        if authz is not None and authz.active:
            parts, refused = authz.split(ctx, AclOperation.READ, parts, lambda p: p.tp.topic)
        results = await fetch(ctx, options, parts) if parts or not refused else []
        if refused:
            results = _in_order(
                [p.tp for p in (*parts, *refused)],
                results,
                [
                    FetchPartResult.failed(p, _refusal(ctx, AclOperation.READ, p.tp))
                    for p in refused
                ],
            )
        fetched(parts, results)
        throttle = 0
        if quotas is not None:
            throttle, results = after_fetch(quotas, ctx, results, ctx.work.elapsed_ns())
        return list(results), throttle

    async def GrantDataAccess(
        self, request: gateway_pb2.GrantDataAccessRequest, context: grpc.aio.ServicerContext
    ) -> gateway_pb2.GrantDataAccessResponse:
        """A grant for a storage node's direct port (decision 0047; `direct_access.py`);
        refusals are answered in `error_code`."""
        ctx = self._context("GrantDataAccess", context)
        try:
            if self.f.direct is None:
                raise RiverlogError(
                    "this gateway offers no direct data access",
                    ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,
                )
            issued = await self.f.direct.grant(
                ctx,
                _GRANT_OPERATIONS.get(request.operation),
                list(request.topics),
                request.node_id,
            )
        except RiverlogError as exc:
            return gateway_pb2.GrantDataAccessResponse(
                error_code=error_code_to_proto(exc.code), error_message=exc.message
            )
        return gateway_pb2.GrantDataAccessResponse(
            grant=issued.grant,
            expires_at_ms=issued.expires_at_ms,
            byte_budget=issued.byte_budget,
            throttle_time_ms=issued.throttle_time_ms,
            host=issued.host,
            direct_port=issued.direct_port,
            lifetime_ms=issued.lifetime_ms,
        )

    async def InitProducerId(
        self, request: transactions_pb2.InitProducerIdRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.InitProducerIdResponse:
        if request.transactional_id:  # its transaction coordinator answers
            answer: transactions_pb2.InitProducerIdResponse = await self.transactions.route(
                "InitProducerId", request, transactions_pb2.InitProducerIdResponse, context
            )
            return answer
        self._context("InitProducerId", context)
        if self.f.producer_ids is None:
            raise RiverlogError("this gateway hands out no producer ids", ErrorCode.INVALID_REQUEST)
        producer_id = request.producer_id if request.HasField("producer_id") else -1
        epoch = request.producer_epoch if request.HasField("producer_epoch") else -1
        result = await self.f.producer_ids.init_producer_id(
            request.transactional_id, producer_id, epoch
        )
        return transactions_pb2.InitProducerIdResponse(
            producer_id=result.producer_id, producer_epoch=result.producer_epoch
        )

    # --- plain records ------------------------------------------------------------------------

    async def ProduceRecords(
        self,
        request: (
            gateway_pb2.ProduceRecordsRequest
            | EncodedProduceRecords
            | convert.UncountedProduceRecords
        ),
        context: grpc.aio.ServicerContext,
    ) -> gateway_pb2.ProduceRecordsResponse:
        """`request` is the bytes with their fields read (`convert.produce_records_request`)
        where the C extension is built, else the protobuf message, or bytes whose records are
        counted here, in a thread (the walk is too long for the event loop)."""
        ctx = self._context("ProduceRecords", context)
        if isinstance(request, convert.UncountedProduceRecords):
            request = await asyncio.to_thread(convert.counted_produce_records_request, request.data)
        quotas = self.f.quotas
        throttle = 0
        if quotas is not None:
            throttle = await quotas.before_produce(ctx, request.ByteSize())
        options = ProduceOptions(acks_from_proto(request.acks), request.timeout_ms)
        if isinstance(request, EncodedProduceRecords):
            produced = await self.f.records.produce_encoded(ctx, request, options)
            produced_plain(request.topic, request, produced.ok)
            if produced.results_wire:  # encoded in C: sent as they are, not parsed back
                if quotas is not None:
                    throttle = quotas.after_request(ctx, throttle, ctx.work.elapsed_ns())
                wire = convert.produced_records_wire(produced.results_wire, throttle)
                return cast(gateway_pb2.ProduceRecordsResponse, wire)  # see _pass_through
            response = convert.produced_records_to_proto(produced)
        else:
            partition = request.partition if request.HasField("partition") else None
            records = [convert.record_from_proto(r) for r in request.records]
            results = await self.f.records.produce(
                ctx, request.topic, partition, records, options, request.compression_type
            )
            ok = sum(1 for r in results if r.error_code == ErrorCode.NONE)
            produced_plain(request.topic, request, ok)
            response = convert.produce_records_to_proto(results)
        if quotas is not None:
            elapsed = ctx.work.elapsed_ns()
            response.throttle_time_ms = quotas.after_request(ctx, throttle, elapsed)
        return response

    async def FetchRecords(
        self, request: gateway_pb2.FetchRecordsRequest, context: grpc.aio.ServicerContext
    ) -> gateway_pb2.FetchRecordsResponse:
        ctx = self._context("FetchRecords", context)
        quotas = self.f.quotas
        sized = data_pb2.FetchRequest(max_bytes=request.max_bytes)  # capped by the quota
        if quotas is not None:
            held = await before_fetch(quotas, ctx, sized)
            if held > 0:
                return gateway_pb2.FetchRecordsResponse(
                    next_offset=request.offset, throttle_time_ms=held
                )
        result = await self.f.records.fetch(
            ctx,
            TopicPartition(request.topic, request.partition),
            request.offset,
            max_records=request.max_records,
            max_bytes=sized.max_bytes,
            max_wait_ms=request.max_wait_ms,
            isolation_level=isolation_level_from_proto(request.isolation_level),
            rack_id=request.rack_id,
        )
        response = convert.fetch_records_to_proto(result)
        if quotas is not None:
            size = response.ByteSize()  # the records, and the few bytes around them
            throttle, emptied = quotas.fetched_records(ctx, size, ctx.work.elapsed_ns())
            if emptied:
                del response.records[:]
                response.next_offset = request.offset
            response.throttle_time_ms = throttle
        fetched_plain(request.topic, response, request.offset, response.next_offset)
        return response

    # --- metadata and offsets -----------------------------------------------------------------

    async def GetMetadata(
        self, request: gateway_pb2.GetMetadataRequest, context: grpc.aio.ServicerContext
    ) -> gateway_pb2.GetMetadataResponse:
        self._context("GetMetadata", context)
        view = self.f.admin.metadata(list(request.topics), request.include_internal)
        return convert.metadata_to_proto(view)

    async def ListOffsets(
        self, request: data_pb2.ListOffsetsRequest, context: grpc.aio.ServicerContext
    ) -> data_pb2.ListOffsetsResponse:
        ctx = self._context("ListOffsets", context)
        parts = convert.list_offsets_from_proto(request)
        level = isolation_level_from_proto(request.isolation_level)
        results = await self.f.offsets.list_offsets(ctx, level, parts)
        return convert.list_offsets_to_proto(results)

    async def DeleteRecords(
        self, request: data_pb2.DeleteRecordsRequest, context: grpc.aio.ServicerContext
    ) -> data_pb2.DeleteRecordsResponse:
        ctx = self._context("DeleteRecords", context)
        parts = convert.delete_records_from_proto(request)
        results = await self.f.offsets.delete_records(ctx, request.timeout_ms, parts)
        return convert.delete_records_to_proto(results)

    # --- administration: delegated to the admin forwarder ---------------------------------------

    async def CreateTopics(
        self, request: admin_pb2.CreateTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CreateTopicsResponse:
        return await self.admin.CreateTopics(request, context)

    async def DeleteTopics(
        self, request: admin_pb2.DeleteTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DeleteTopicsResponse:
        return await self.admin.DeleteTopics(request, context)

    async def CreatePartitions(
        self, request: admin_pb2.CreatePartitionsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CreatePartitionsResponse:
        return await self.admin.CreatePartitions(request, context)

    async def AlterConfigs(
        self, request: admin_pb2.AlterConfigsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.AlterConfigsResponse:
        return await self.admin.AlterConfigs(request, context)

    async def DescribeConfigs(
        self, request: admin_pb2.DescribeConfigsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeConfigsResponse:
        response: admin_pb2.DescribeConfigsResponse = await self.admin.forward(
            "DescribeConfigs", request, context
        )
        return response

    async def ListTopics(
        self, request: admin_pb2.ListTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListTopicsResponse:
        response: admin_pb2.ListTopicsResponse = await self.admin.forward(
            "ListTopics", request, context
        )
        return response

    async def DescribeTopics(
        self, request: admin_pb2.DescribeTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeTopicsResponse:
        response: admin_pb2.DescribeTopicsResponse = await self.admin.forward(
            "DescribeTopics", request, context
        )
        return response

    async def DescribeCluster(
        self, request: admin_pb2.DescribeClusterRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeClusterResponse:
        response: admin_pb2.DescribeClusterResponse = await self.admin.forward(
            "DescribeCluster", request, context
        )
        return response

    async def ElectLeaders(
        self, request: admin_pb2.ElectLeadersRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ElectLeadersResponse:
        response: admin_pb2.ElectLeadersResponse = await self.admin.forward(
            "ElectLeaders", request, context
        )
        return response

    async def AlterPartitionReassignments(
        self,
        request: admin_pb2.AlterPartitionReassignmentsRequest,
        context: grpc.aio.ServicerContext,
    ) -> admin_pb2.AlterPartitionReassignmentsResponse:
        response: admin_pb2.AlterPartitionReassignmentsResponse = await self.admin.forward(
            "AlterPartitionReassignments", request, context
        )
        return response

    async def BalanceReplicas(
        self, request: admin_pb2.BalanceReplicasRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.BalanceReplicasResponse:
        response: admin_pb2.BalanceReplicasResponse = await self.admin.forward(
            "BalanceReplicas", request, context
        )
        return response

    async def AlterNodeDraining(
        self, request: admin_pb2.AlterNodeDrainingRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.AlterNodeDrainingResponse:
        response: admin_pb2.AlterNodeDrainingResponse = await self.admin.forward(
            "AlterNodeDraining", request, context
        )
        return response

    async def ListPartitionReassignments(
        self,
        request: admin_pb2.ListPartitionReassignmentsRequest,
        context: grpc.aio.ServicerContext,
    ) -> admin_pb2.ListPartitionReassignmentsResponse:
        response: admin_pb2.ListPartitionReassignmentsResponse = await self.admin.forward(
            "ListPartitionReassignments", request, context
        )
        if self.f.progress is not None and response.partitions:
            moves = {
                TopicPartition(p.topic, p.partition): tuple(p.replicas) for p in response.partitions
            }
            logs = await self.f.progress.replica_logs(
                moves, self.contexts.of_call("ListPartitionReassignments", context).deadline
            )
            for p in response.partitions:
                for node, (leo, size) in sorted(logs[TopicPartition(p.topic, p.partition)].items()):
                    p.replica_progress.add(node_id=node, log_end_offset=leo, size_bytes=size)
        return response

    async def DescribeLogDirs(
        self,
        request: admin_pb2.DescribeClusterLogDirsRequest,
        context: grpc.aio.ServicerContext,
    ) -> admin_pb2.DescribeClusterLogDirsResponse:
        if self.f.log_dirs is None:
            raise RiverlogError(
                "this gateway cannot describe log dirs", ErrorCode.UNSUPPORTED_VERSION
            )
        ctx = self._context("DescribeLogDirs", context)
        answer = await self.f.log_dirs.describe(
            convert.log_dirs_query_from_proto(request), ctx.deadline
        )
        return convert.log_dirs_to_proto(answer)

    async def AlterClientQuotas(
        self, request: admin_pb2.AlterClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.AlterClientQuotasResponse:
        response: admin_pb2.AlterClientQuotasResponse = await self.admin.forward(
            "AlterClientQuotas", request, context
        )
        return response

    async def DescribeClientQuotas(
        self, request: admin_pb2.DescribeClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeClientQuotasResponse:
        response: admin_pb2.DescribeClientQuotasResponse = await self.admin.forward(
            "DescribeClientQuotas", request, context
        )
        return response

    async def UpsertUser(
        self, request: admin_pb2.UpsertUserRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.UpsertUserResponse:
        response: admin_pb2.UpsertUserResponse = await self.admin.forward(
            "UpsertUser", request, context
        )
        return response

    async def DeleteUser(
        self, request: admin_pb2.DeleteUserRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DeleteUserResponse:
        response: admin_pb2.DeleteUserResponse = await self.admin.forward(
            "DeleteUser", request, context
        )
        return response

    async def ListUsers(
        self, request: admin_pb2.ListUsersRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListUsersResponse:
        response: admin_pb2.ListUsersResponse = await self.admin.forward(
            "ListUsers", request, context
        )
        return response

    # --- ACLs: passed through to the metadata service (checked by the interceptor) --------------

    async def CreateAcls(
        self, request: acls_pb2.CreateAclsRequest, context: grpc.aio.ServicerContext
    ) -> acls_pb2.CreateAclsResponse:
        response: acls_pb2.CreateAclsResponse = await self.admin.forward(
            "CreateAcls", request, context
        )
        return response

    async def DescribeAcls(
        self, request: acls_pb2.DescribeAclsRequest, context: grpc.aio.ServicerContext
    ) -> acls_pb2.DescribeAclsResponse:
        response: acls_pb2.DescribeAclsResponse = await self.admin.forward(
            "DescribeAcls", request, context
        )
        return response

    async def DeleteAcls(
        self, request: acls_pb2.DeleteAclsRequest, context: grpc.aio.ServicerContext
    ) -> acls_pb2.DeleteAclsResponse:
        response: acls_pb2.DeleteAclsResponse = await self.admin.forward(
            "DeleteAcls", request, context
        )
        return response

    # --- transactions: delegated to the transaction forwarder ----------------------------------

    async def AddPartitionsToTxn(
        self, request: transactions_pb2.AddPartitionsToTxnRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.AddPartitionsToTxnResponse:
        response: transactions_pb2.AddPartitionsToTxnResponse = await self.transactions.route(
            "AddPartitionsToTxn", request, transactions_pb2.AddPartitionsToTxnResponse, context
        )
        return response

    async def AddOffsetsToTxn(
        self, request: transactions_pb2.AddOffsetsToTxnRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.AddOffsetsToTxnResponse:
        response: transactions_pb2.AddOffsetsToTxnResponse = await self.transactions.route(
            "AddOffsetsToTxn", request, transactions_pb2.AddOffsetsToTxnResponse, context
        )
        return response

    async def EndTxn(
        self, request: transactions_pb2.EndTxnRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.EndTxnResponse:
        response: transactions_pb2.EndTxnResponse = await self.transactions.route(
            "EndTxn", request, transactions_pb2.EndTxnResponse, context
        )
        return response

    async def DescribeTransactions(
        self,
        request: transactions_pb2.DescribeTransactionsRequest,
        context: grpc.aio.ServicerContext,
    ) -> transactions_pb2.DescribeTransactionsResponse:
        return await self.transactions.DescribeTransactions(request, context)

    async def ListTransactions(
        self, request: transactions_pb2.ListTransactionsRequest, context: grpc.aio.ServicerContext
    ) -> transactions_pb2.ListTransactionsResponse:
        return await self.transactions.ListTransactions(request, context)

    async def AbortTransaction(
        self, request: coordinator_pb2.AbortTransactionRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.AbortTransactionResponse:
        response: coordinator_pb2.AbortTransactionResponse = await self.transactions.route(
            "AbortTransaction", request, coordinator_pb2.AbortTransactionResponse, context
        )
        return response

    # --- consumer groups: delegated to the group forwarder --------------------------------------

    async def FindCoordinator(
        self, request: coordinator_pb2.FindCoordinatorRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.FindCoordinatorResponse:
        return await self.groups.FindCoordinator(request, context)

    async def JoinGroup(
        self, request: coordinator_pb2.JoinGroupRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.JoinGroupResponse:
        return await self.groups.JoinGroup(request, context)

    async def ListGroups(
        self, request: coordinator_pb2.ListGroupsRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.ListGroupsResponse:
        return await self.groups.ListGroups(request, context)

    async def DescribeGroups(
        self, request: coordinator_pb2.DescribeGroupsRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.DescribeGroupsResponse:
        return await self.groups.DescribeGroups(request, context)

    async def DeleteGroups(
        self, request: coordinator_pb2.DeleteGroupsRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.DeleteGroupsResponse:
        return await self.groups.DeleteGroups(request, context)

    async def SyncGroup(
        self, request: coordinator_pb2.SyncGroupRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.SyncGroupResponse:
        response: coordinator_pb2.SyncGroupResponse = await self.groups.route(
            "SyncGroup", request, coordinator_pb2.SyncGroupResponse, context
        )
        return response

    async def Heartbeat(
        self, request: coordinator_pb2.GroupHeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.GroupHeartbeatResponse:
        response: coordinator_pb2.GroupHeartbeatResponse = await self.groups.route(
            "Heartbeat", request, coordinator_pb2.GroupHeartbeatResponse, context
        )
        return response

    async def LeaveGroup(
        self, request: coordinator_pb2.LeaveGroupRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.LeaveGroupResponse:
        response: coordinator_pb2.LeaveGroupResponse = await self.groups.route(
            "LeaveGroup", request, coordinator_pb2.LeaveGroupResponse, context
        )
        return response

    async def OffsetCommit(
        self, request: coordinator_pb2.OffsetCommitRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.OffsetCommitResponse:
        response: coordinator_pb2.OffsetCommitResponse = await self.groups.route(
            "OffsetCommit", request, coordinator_pb2.OffsetCommitResponse, context
        )
        return response

    async def TxnOffsetCommit(
        self, request: coordinator_pb2.TxnOffsetCommitRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.TxnOffsetCommitResponse:
        response: coordinator_pb2.TxnOffsetCommitResponse = await self.groups.route(
            "TxnOffsetCommit", request, coordinator_pb2.TxnOffsetCommitResponse, context
        )
        return response

    async def OffsetFetch(
        self, request: coordinator_pb2.OffsetFetchRequest, context: grpc.aio.ServicerContext
    ) -> coordinator_pb2.OffsetFetchResponse:
        response: coordinator_pb2.OffsetFetchResponse = await self.groups.route(
            "OffsetFetch", request, coordinator_pb2.OffsetFetchResponse, context
        )
        return response


_R = TypeVar("_R", ProducePartResult, FetchPartResult)


def _refusal(ctx: RequestContext, op: AclOperation, tp: TopicPartition) -> RiverlogError:
    return denied(ctx, op, ResourceType.TOPIC, tp.topic)


def _in_order(
    order: Sequence[TopicPartition], done: Sequence[_R], refused: Sequence[_R]
) -> list[_R]:
    """The results of the allowed and the refused partitions in the request's order (`order`
    holds each partition once; a partition the leaders did not answer stays out)."""
    by_tp: dict[TopicPartition, _R] = {}
    for results in (done, refused):
        for r in results:
            by_tp[r.tp] = r
    return [by_tp[tp] for tp in order if tp in by_tp]


def _serialized(wire: bytes) -> data_pb2.FetchResponse:
    """A FetchResponse already serialized (`convert.fetch_to_wire`), returned as the message
    it stands for: Fetch and FetchStream are registered with `_pass_through`, which sends
    bytes as they are (`add_to_server`)."""
    return cast(data_pb2.FetchResponse, wire)


def _pass_through(response: Any) -> bytes:
    """The response serializer of the methods whose servicer may answer with the message's
    bytes (Fetch, FetchStream, ProduceRecords): those as they are, a message serialized."""
    if isinstance(response, bytes):
        return response
    wire: bytes = response.SerializeToString()
    return wire


def add_to_server(servicer: GatewayServicer, server: grpc.aio.Server) -> None:
    gateway_pb2_grpc.add_GatewayServicer_to_server(servicer, _EncodedMethods(server))


_METHOD_PREFIX: Final = f"/{SERVICE_NAME}/"


def _encoded(name: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """`name`'s handler as the gateway serves it: ProduceRecords reads its request with
    `convert.produce_records_request` (decision 0045); Produce and ProduceStream with
    `parse_produce_request` (the batches left in the received bytes, decision 0015); Fetch and
    FetchStream send the answers the servicer serialized itself (`_serialized`: the records
    spliced into the wire bytes, not copied through the message; decision 0016, addendum), as
    ProduceRecords sends the results C encoded (`_pass_through`)."""
    if name == "ProduceRecords":
        return handler._replace(
            request_deserializer=convert.produce_records_request,
            response_serializer=_pass_through,
        )
    if name in ("Produce", "ProduceStream"):
        return handler._replace(request_deserializer=parse_produce_request)
    if name in ("Fetch", "FetchStream"):
        return handler._replace(response_serializer=_pass_through)
    return handler


class _EncodedGeneric(grpc.GenericRpcHandler):  # type: ignore[misc]
    def __init__(self, inner: grpc.GenericRpcHandler) -> None:
        self.inner = inner

    def service(
        self, handler_call_details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler | None:
        handler = self.inner.service(handler_call_details)
        method = handler_call_details.method
        if handler is not None and method.startswith(_METHOD_PREFIX):
            return _encoded(method[len(_METHOD_PREFIX) :], handler)
        return handler


class _EncodedMethods:
    """The server as the generated registration sees it: the same handlers, except the ones
    `_encoded` changes (the generated code stays as generated)."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self.server = server

    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self.server.add_generic_rpc_handlers([_EncodedGeneric(h) for h in handlers])

    def add_registered_method_handlers(
        self, service_name: str, handlers: dict[str, grpc.RpcMethodHandler]
    ) -> None:
        if service_name == SERVICE_NAME:
            handlers = {name: _encoded(name, h) for name, h in handlers.items()}
        self.server.add_registered_method_handlers(service_name, handlers)
