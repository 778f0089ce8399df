"""The Gateway gRPC servicer: a thin adapter from the client API to the request families.

Each method builds the request's `RequestContext` (client id from `riverlog-client-id`, the
principal from the call's credentials (`auth.py`; UNAUTHENTICATED when they are wrong), deadline
from the call's own deadline and request.timeout.ms), converts the message, awaits the family,
and converts back; produce and fetch paths go through the quota checks first and put the
throttle time in the response (`quotas.py`). Whole-request errors are raised as RiverlogError
and mapped to a gRPC status by the shared interceptor; on streams they become per-partition
errors instead, so one bad request does not end the stream. Topic admin calls go to the metadata
service as they are, except items the gateway already knows are wrong (a name that cannot be a
topic), which are answered here and never sent.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.entity import ANONYMOUS
from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.common.types import TopicPartition
from riverlog.v1 import admin_pb2, data_pb2, gateway_pb2, gateway_pb2_grpc

from ..admin import Admin
from ..auth import OPEN_METHODS, Authenticator
from ..config import GatewayConfig
from ..context import UNKNOWN_CLIENT, Deadline, RequestContext, bind
from ..fetch import Fetcher
from ..groups import GroupRouter
from ..offsets import Offsets
from ..peers.metadata import MetadataPeer
from ..produce import Acks, ProduceOptions, Producer
from ..producer_ids import ProducerIdAllocator
from ..quotas import GatewayQuotas, produce_size
from ..records import PlainRecords
from ..streams import Pipeline
from ..validation import topic_error
from . import convert
from .groups import GroupMethods

log = logging.getLogger(__name__)

SERVICE_NAME = "riverlog.v1.Gateway"
_MAX_CLIENT_ID = 256


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


def client_id_of(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_KEY:
            text = value if isinstance(value, str) else value.decode("utf-8", "replace")
            return text[:_MAX_CLIENT_ID] or UNKNOWN_CLIENT
    return UNKNOWN_CLIENT


class GatewayServicer(GroupMethods, gateway_pb2_grpc.GatewayServicer):
    """One per gateway process; grpc calls its methods from the event loop, one task per call."""

    def __init__(self, families: Families) -> None:
        self.f = families

    def _context(self, method: str, context: grpc.aio.ServicerContext) -> RequestContext:
        ctx = RequestContext(
            method=method,
            deadline=Deadline.for_call(self.f.config.request_timeout_s, context.time_remaining()),
            client_id=client_id_of(context),
            peer=context.peer() or "",
            principal=self._principal(method, context),
        )
        bind(ctx)
        return ctx

    def _principal(self, method: str, context: grpc.aio.ServicerContext) -> str:
        if self.f.auth is None:
            return ANONYMOUS
        metadata = context.invocation_metadata() or ()
        return self.f.auth.principal(metadata, anonymous_ok=method in OPEN_METHODS)

    def _stream_request_context(self, parent: RequestContext) -> RequestContext:
        ctx = RequestContext(
            method=parent.method,
            deadline=Deadline.after(self.f.config.request_timeout_s),
            client_id=parent.client_id,
            peer=parent.peer,
            principal=parent.principal,
        )
        bind(ctx)
        return ctx

    # --- record batches -----------------------------------------------------------------------

    async def Produce(
        self, request: data_pb2.ProduceRequest, context: grpc.aio.ServicerContext
    ) -> data_pb2.ProduceResponse:
        ctx = self._context("Produce", context)
        quotas = self.f.quotas
        throttle = 0
        if quotas is not None:
            throttle = await quotas.before_produce(ctx, produce_size(request))
        started = time.perf_counter_ns()
        options, parts = convert.produce_from_proto(request)
        results = await self.f.producer.produce(ctx, options, parts)
        response = convert.produce_to_proto(results, request.correlation_id)
        if quotas is not None:
            elapsed = time.perf_counter_ns() - started
            response.throttle_time_ms = quotas.after_request(ctx, throttle, elapsed)
        return response

    async def ProduceStream(
        self,
        request_iterator: AsyncIterator[data_pb2.ProduceRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[data_pb2.ProduceResponse]:
        stream = self._context("ProduceStream", context)

        async def handle(request: data_pb2.ProduceRequest) -> data_pb2.ProduceResponse | None:
            ctx = self._stream_request_context(stream)
            quotas = self.f.quotas
            throttle = 0
            if quotas is not None:
                throttle = await quotas.before_produce(ctx, produce_size(request))
            started = time.perf_counter_ns()
            options, parts = convert.produce_from_proto(request)
            results = await self.f.producer.produce_or_fail(ctx, options, parts)
            if quotas is not None:
                elapsed = time.perf_counter_ns() - started
                throttle = quotas.after_request(ctx, throttle, elapsed)
            if options.acks == Acks.NONE:
                return None  # acks=0 on a stream: no answer, as Kafka (and the storage nodes)
            response = convert.produce_to_proto(results, request.correlation_id)
            response.throttle_time_ms = throttle
            return response

        pipeline = Pipeline(handle, self.f.config.max_in_flight_requests_per_connection)
        async for response in pipeline.run(request_iterator):
            yield response

    async def Fetch(
        self, request: data_pb2.FetchRequest, context: grpc.aio.ServicerContext
    ) -> data_pb2.FetchResponse:
        ctx = self._context("Fetch", context)
        quotas = self.f.quotas
        if quotas is not None:
            held = await quotas.before_fetch(ctx, request)
            if held > 0:  # answered empty: the client waits, then asks again
                return data_pb2.FetchResponse(
                    throttle_time_ms=held, correlation_id=request.correlation_id
                )
        started = time.perf_counter_ns()
        options, parts = convert.fetch_from_proto(request)
        results = await self.f.fetcher.fetch(ctx, options, parts)
        response = convert.fetch_to_proto(results, request.correlation_id)
        if quotas is not None:
            elapsed = time.perf_counter_ns() - started
            response.throttle_time_ms = quotas.after_fetch(ctx, response, elapsed)
        return response

    async def FetchStream(
        self,
        request_iterator: AsyncIterator[data_pb2.FetchRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[data_pb2.FetchResponse]:
        stream = self._context("FetchStream", context)

        async def handle(request: data_pb2.FetchRequest) -> data_pb2.FetchResponse:
            ctx = self._stream_request_context(stream)
            quotas = self.f.quotas
            if quotas is not None:
                held = await quotas.before_fetch(ctx, request)
                if held > 0:
                    return data_pb2.FetchResponse(
                        throttle_time_ms=held, correlation_id=request.correlation_id
                    )
            started = time.perf_counter_ns()
            options, parts = convert.fetch_from_proto(request)
            results = await self.f.fetcher.fetch_or_fail(ctx, options, parts)
            response = convert.fetch_to_proto(results, request.correlation_id)
            if quotas is not None:
                elapsed = time.perf_counter_ns() - started
                response.throttle_time_ms = quotas.after_fetch(ctx, response, elapsed)
            return response

        pipeline = Pipeline(handle, self.f.config.max_in_flight_requests_per_connection)
        async for response in pipeline.run(request_iterator):
            yield response

    async def InitProducerId(
        self, request: gateway_pb2.InitProducerIdRequest, context: grpc.aio.ServicerContext
    ) -> gateway_pb2.InitProducerIdResponse:
        self._context("InitProducerId", context)
        if self.f.producer_ids is None:
            raise RiverlogError("this gateway hands out no producer ids", ErrorCode.INVALID_REQUEST)
        producer_id = request.producer_id if request.HasField("producer_id") else -1
        epoch = request.producer_epoch if request.HasField("producer_epoch") else -1
        result = await self.f.producer_ids.init_producer_id(
            request.transactional_id, producer_id, epoch
        )
        return gateway_pb2.InitProducerIdResponse(
            producer_id=result.producer_id, producer_epoch=result.producer_epoch
        )

    # --- plain records ------------------------------------------------------------------------

    async def ProduceRecords(
        self, request: gateway_pb2.ProduceRecordsRequest, context: grpc.aio.ServicerContext
    ) -> gateway_pb2.ProduceRecordsResponse:
        ctx = self._context("ProduceRecords", context)
        quotas = self.f.quotas
        throttle = 0
        if quotas is not None:
            throttle = await quotas.before_produce(ctx, request.ByteSize())
        started = time.perf_counter_ns()
        partition = request.partition if request.HasField("partition") else None
        options = ProduceOptions(int(request.acks), request.timeout_ms)
        records = [convert.record_from_proto(r) for r in request.records]
        results = await self.f.records.produce(
            ctx, request.topic, partition, records, options, request.compression_type
        )
        response = convert.produce_records_to_proto(results)
        if quotas is not None:
            elapsed = time.perf_counter_ns() - started
            response.throttle_time_ms = quotas.after_request(ctx, throttle, elapsed)
        return response

    async def FetchRecords(
        self, request: gateway_pb2.FetchRecordsRequest, context: grpc.aio.ServicerContext
    ) -> gateway_pb2.FetchRecordsResponse:
        ctx = self._context("FetchRecords", context)
        quotas = self.f.quotas
        sized = data_pb2.FetchRequest(max_bytes=request.max_bytes)  # capped by the quota
        if quotas is not None:
            held = await quotas.before_fetch(ctx, sized)
            if held > 0:
                return gateway_pb2.FetchRecordsResponse(
                    next_offset=request.offset, throttle_time_ms=held
                )
        started = time.perf_counter_ns()
        result = await self.f.records.fetch(
            ctx,
            TopicPartition(request.topic, request.partition),
            request.offset,
            max_records=request.max_records,
            max_bytes=sized.max_bytes,
            max_wait_ms=request.max_wait_ms,
            isolation_level=int(request.isolation_level),
        )
        response = convert.fetch_records_to_proto(result)
        if quotas is not None:
            elapsed = time.perf_counter_ns() - started
            size = sum(r.ByteSize() for r in response.records)
            throttle, emptied = quotas.fetched_records(ctx, size, elapsed)
            if emptied:
                del response.records[:]
                response.next_offset = request.offset
            response.throttle_time_ms = throttle
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
        results = await self.f.offsets.list_offsets(ctx, int(request.isolation_level), parts)
        return convert.list_offsets_to_proto(results)

    async def DeleteRecords(
        self, request: data_pb2.DeleteRecordsRequest, context: grpc.aio.ServicerContext
    ) -> data_pb2.DeleteRecordsResponse:
        ctx = self._context("DeleteRecords", context)
        parts = convert.delete_records_from_proto(request)
        results = await self.f.offsets.delete_records(ctx, request.timeout_ms, parts)
        return convert.delete_records_to_proto(results)

    # --- topic administration: passed through -------------------------------------------------

    async def CreateTopics(
        self, request: admin_pb2.CreateTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CreateTopicsResponse:
        ctx = self._context("CreateTopics", context)
        response: admin_pb2.CreateTopicsResponse = await self._screened(
            ctx, request, "topics", lambda t: t.name, admin_pb2.CreateTopicsResponse
        )
        if not request.validate_only:
            created = {t.name: t.topic_id for t in response.topics if t.error_code == 0}
            await self.f.admin.await_created(created, ctx.deadline)
        return response

    async def DeleteTopics(
        self, request: admin_pb2.DeleteTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DeleteTopicsResponse:
        ctx = self._context("DeleteTopics", context)
        before = self.f.admin.topic_ids(list(request.names))
        response: admin_pb2.DeleteTopicsResponse = await self._screened(
            ctx, request, "names", lambda n: n, admin_pb2.DeleteTopicsResponse
        )
        deleted = {t.name: before.get(t.name, "") for t in response.topics if t.error_code == 0}
        await self.f.admin.await_deleted(deleted, ctx.deadline)
        return response

    async def CreatePartitions(
        self, request: admin_pb2.CreatePartitionsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.CreatePartitionsResponse:
        ctx = self._context("CreatePartitions", context)
        response: admin_pb2.CreatePartitionsResponse = await self._screened(
            ctx, request, "topics", lambda t: t.name, admin_pb2.CreatePartitionsResponse
        )
        if not request.validate_only:
            ok = {r.name for r in response.topics if r.error_code == 0}
            counts = {t.name: t.count for t in request.topics if t.name in ok}
            await self.f.admin.await_partitions(counts, ctx.deadline)
        return response

    async def AlterConfigs(
        self, request: admin_pb2.AlterConfigsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.AlterConfigsResponse:
        ctx = self._context("AlterConfigs", context)
        response: admin_pb2.AlterConfigsResponse = await self._screened(
            ctx, request, "topics", lambda t: t.name, admin_pb2.AlterConfigsResponse
        )
        return response

    async def DescribeConfigs(
        self, request: admin_pb2.DescribeConfigsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeConfigsResponse:
        return await self._pass("DescribeConfigs", request, context)  # type: ignore[no-any-return]

    async def ListTopics(
        self, request: admin_pb2.ListTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListTopicsResponse:
        return await self._pass("ListTopics", request, context)  # type: ignore[no-any-return]

    async def DescribeTopics(
        self, request: admin_pb2.DescribeTopicsRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeTopicsResponse:
        return await self._pass("DescribeTopics", request, context)  # type: ignore[no-any-return]

    async def DescribeCluster(
        self, request: admin_pb2.DescribeClusterRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeClusterResponse:
        return await self._pass("DescribeCluster", request, context)  # type: ignore[no-any-return]

    async def ElectLeaders(
        self, request: admin_pb2.ElectLeadersRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ElectLeadersResponse:
        return await self._pass("ElectLeaders", request, context)  # type: ignore[no-any-return]

    # --- client quotas and users: passed through ----------------------------------------------

    async def AlterClientQuotas(
        self, request: admin_pb2.AlterClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.AlterClientQuotasResponse:
        return await self._pass("AlterClientQuotas", request, context)  # type: ignore[no-any-return]

    async def DescribeClientQuotas(
        self, request: admin_pb2.DescribeClientQuotasRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DescribeClientQuotasResponse:
        return await self._pass("DescribeClientQuotas", request, context)  # type: ignore[no-any-return]

    async def UpsertUser(
        self, request: admin_pb2.UpsertUserRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.UpsertUserResponse:
        return await self._pass("UpsertUser", request, context)  # type: ignore[no-any-return]

    async def DeleteUser(
        self, request: admin_pb2.DeleteUserRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.DeleteUserResponse:
        return await self._pass("DeleteUser", request, context)  # type: ignore[no-any-return]

    async def ListUsers(
        self, request: admin_pb2.ListUsersRequest, context: grpc.aio.ServicerContext
    ) -> admin_pb2.ListUsersResponse:
        return await self._pass("ListUsers", request, context)  # type: ignore[no-any-return]

    async def _pass(self, method: str, request: Any, context: grpc.aio.ServicerContext) -> Any:
        ctx = self._context(method, context)
        return await self.f.metadata.call(method, request, ctx.deadline)

    async def _screened(
        self,
        ctx: RequestContext,
        request: Any,
        field: str,
        name_of: Callable[[Any], str],
        response_type: Callable[[], Any],
    ) -> Any:
        """Forward `request` without the items whose name cannot be a topic; those are answered
        here with INVALID_TOPIC_EXCEPTION. Results come back in request order, matched by name
        (the metadata service answers each name once)."""
        items: Sequence[Any] = getattr(request, field)
        bad = {i: topic_error(name_of(item)) for i, item in enumerate(items)}
        refused = {i: e for i, e in bad.items() if e is not None}
        if not refused:
            return await self.f.metadata.call(ctx.method, request, ctx.deadline)
        response = response_type()
        kept = [item for i, item in enumerate(items) if i not in refused]
        answers: dict[str, Any] = {}
        if kept:
            forwarded = type(request)()
            forwarded.CopyFrom(request)
            del getattr(forwarded, field)[:]
            getattr(forwarded, field).extend(kept)
            sent = await self.f.metadata.call(ctx.method, forwarded, ctx.deadline)
            answers = {t.name: t for t in sent.topics}
        for i, item in enumerate(items):
            error = refused.get(i)
            if error is not None:
                response.topics.add(
                    name=name_of(item), error_code=error.code, error_message=error.message
                )
            elif name_of(item) in answers:
                response.topics.append(answers[name_of(item)])
            else:
                response.topics.add(
                    name=name_of(item),
                    error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                    error_message="the metadata service gave no result for this topic",
                )
        log.info("[%s] refused %d invalid topic names before forwarding", ctx, len(refused))
        return response


def add_to_server(servicer: GatewayServicer, server: grpc.aio.Server) -> None:
    gateway_pb2_grpc.add_GatewayServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
