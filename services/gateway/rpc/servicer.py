"""The Gateway gRPC servicer: a thin adapter from the client API to the request families.

Each method builds the request's `RequestContext` (client id from `riverlog-client-id`, the
principal from the call's credentials (`auth.py`; UNAUTHENTICATED when they are wrong), deadline
from the call's own deadline and request.timeout.ms), converts the message, awaits the family,
and converts back; produce and fetch paths go through the quota checks first and put the
throttle time in the response (`quotas.py`), every other unary method gets the request quota
from the wrapper in `request_quota.py`. Whole-request errors are raised as RiverlogError
and mapped to a gRPC status by the shared interceptor; on streams they become per-partition
errors instead, so one bad request does not end the stream. Administration RPCs (passed to the
metadata service) are mixed in from `admin.py`, consumer-group RPCs from `groups.py`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota.entity import ANONYMOUS
from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.common.rpc.convert import acks_from_proto, isolation_level_from_proto
from riverlog.common.types import Acks, TopicPartition
from riverlog.v1 import data_pb2, gateway_pb2, gateway_pb2_grpc

from ..admin import Admin
from ..auth import OPEN_METHODS, Authenticator
from ..config import GatewayConfig
from ..context import UNKNOWN_CLIENT, Deadline, RequestContext, bind, current_request
from ..fetch import Fetcher, FetchOptions, FetchPart, FetchPartResult
from ..groups import GroupRouter
from ..offsets import Offsets
from ..peers.metadata import MetadataPeer
from ..produce import ProduceOptions, ProducePart, ProducePartResult, Producer
from ..producer_ids import ProducerIdAllocator
from ..quotas import GatewayQuotas
from ..records import PlainRecords
from ..streams import Pipeline
from . import convert
from .admin import AdminMethods
from .groups import GroupMethods
from .request_quota import after_fetch, before_fetch, produce_size
from .request_quota import install as install_request_quota

log = logging.getLogger(__name__)

SERVICE_NAME = "riverlog.v1.Gateway"
_MAX_CLIENT_ID = 256

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


def client_id_of(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_KEY:
            text = value if isinstance(value, str) else value.decode("utf-8", "replace")
            return text[:_MAX_CLIENT_ID] or UNKNOWN_CLIENT
    return UNKNOWN_CLIENT


def certificate_name(context: grpc.aio.ServicerContext) -> str | None:
    """The common name of the call's TLS client certificate, which gRPC reports only once it
    verified the certificate against ssl.ca.location; None on plaintext or without one."""
    names = (context.auth_context() or {}).get("x509_common_name") or ()
    for value in names:
        text = value if isinstance(value, str) else value.decode("utf-8", "replace")
        if text:
            return text
    return None


class GatewayServicer(AdminMethods, GroupMethods, gateway_pb2_grpc.GatewayServicer):
    """One per gateway process; grpc calls its methods from the event loop, one task per call."""

    def __init__(self, families: Families) -> None:
        self.f = families

    @property
    def quotas(self) -> GatewayQuotas | None:
        return self.f.quotas

    def _context(self, method: str, context: grpc.aio.ServicerContext) -> RequestContext:
        """The call's context: made (and bound) once per call, by the request-quota wrapper
        around the method, and found again when the method asks."""
        bound = current_request.get()
        if bound is not None and bound.call is context:
            return bound
        ctx = RequestContext(
            method=method,
            deadline=Deadline.for_call(self.f.config.request_timeout_s, context.time_remaining()),
            client_id=client_id_of(context),
            peer=context.peer() or "",
            principal=self._principal(method, context),
            call=context,
        )
        bind(ctx)
        return ctx

    def _principal(self, method: str, context: grpc.aio.ServicerContext) -> str:
        if self.f.auth is None:
            return ANONYMOUS
        metadata = context.invocation_metadata() or ()
        return self.f.auth.principal(
            metadata,
            anonymous_ok=method in OPEN_METHODS,
            certificate_name=certificate_name(context),
        )

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
        _, results, throttle = await self._produce(ctx, request, self.f.producer.produce)
        response = convert.produce_to_proto(results, request.correlation_id)
        response.throttle_time_ms = throttle
        return response

    async def ProduceStream(
        self,
        request_iterator: AsyncIterator[data_pb2.ProduceRequest],
        context: grpc.aio.ServicerContext,
    ) -> AsyncIterator[data_pb2.ProduceResponse]:
        stream = self._context("ProduceStream", context)

        async def handle(request: data_pb2.ProduceRequest) -> data_pb2.ProduceResponse | None:
            ctx = self._stream_request_context(stream)
            produce = self.f.producer.produce_or_fail
            options, results, throttle = await ctx.work.run(self._produce(ctx, request, produce))
            if options.acks == Acks.NONE:
                return None  # acks=0 on a stream: no answer, as Kafka (and the storage nodes)
            response = convert.produce_to_proto(results, request.correlation_id)
            response.throttle_time_ms = throttle
            return response

        pipeline = Pipeline(handle, self.f.config.max_in_flight_requests_per_connection)
        async for response in pipeline.run(request_iterator):
            yield response

    async def _produce(
        self, ctx: RequestContext, request: data_pb2.ProduceRequest, produce: ProduceCall
    ) -> tuple[ProduceOptions, list[ProducePartResult], int]:
        """`produce` the request between the quota checks: its options, results and the
        throttle time to answer with."""
        quotas = self.f.quotas
        throttle = 0
        if quotas is not None:
            throttle = await quotas.before_produce(ctx, produce_size(request))
        options, parts = convert.produce_from_proto(request)
        results = await produce(ctx, options, parts)
        if quotas is not None:
            throttle = quotas.after_request(ctx, throttle, ctx.work.elapsed_ns())
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

        async def handle(request: data_pb2.FetchRequest) -> data_pb2.FetchResponse:
            ctx = self._stream_request_context(stream)
            return await ctx.work.run(self._fetch(ctx, request, self.f.fetcher.fetch_or_fail))

        pipeline = Pipeline(handle, self.f.config.max_in_flight_requests_per_connection)
        async for response in pipeline.run(request_iterator):
            yield response

    async def _fetch(
        self, ctx: RequestContext, request: data_pb2.FetchRequest, fetch: FetchCall
    ) -> data_pb2.FetchResponse:
        """`fetch` the request between the quota checks; answered empty while the client is
        held (it waits, then asks again)."""
        quotas = self.f.quotas
        if quotas is not None:
            held = await before_fetch(quotas, ctx, request)
            if held > 0:
                return data_pb2.FetchResponse(
                    throttle_time_ms=held, correlation_id=request.correlation_id
                )
        options, parts = convert.fetch_from_proto(request)
        results = await fetch(ctx, options, parts)
        response = convert.fetch_to_proto(results, request.correlation_id)
        if quotas is not None:
            response.throttle_time_ms = after_fetch(quotas, ctx, response, ctx.work.elapsed_ns())
        return response

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
        partition = request.partition if request.HasField("partition") else None
        options = ProduceOptions(acks_from_proto(request.acks), request.timeout_ms)
        records = [convert.record_from_proto(r) for r in request.records]
        results = await self.f.records.produce(
            ctx, request.topic, partition, records, options, request.compression_type
        )
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
        )
        response = convert.fetch_records_to_proto(result)
        if quotas is not None:
            size = sum(r.ByteSize() for r in response.records)
            throttle, emptied = quotas.fetched_records(ctx, size, ctx.work.elapsed_ns())
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


# Produce and fetch charge the handler time themselves, next to their byte quotas.
install_request_quota(GatewayServicer, ("Produce", "Fetch", "ProduceRecords", "FetchRecords"))


def add_to_server(servicer: GatewayServicer, server: grpc.aio.Server) -> None:
    gateway_pb2_grpc.add_GatewayServicer_to_server(servicer, server)
