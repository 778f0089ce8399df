"""The StorageService gRPC servicer: decode, call the domain handlers, encode. Nothing else.

Whole-request failures (a negative max_bytes, ...) are raised as RiverlogError and mapped to a
gRPC status by the shared interceptor; per-partition failures travel in the response. The
ProduceStream keeps appends in arrival order (so a stream never reorders a partition's
batches) and lets acknowledgements complete on their own, so one acks=all request waiting for
replication does not hold back the answers of the requests behind it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any

from riverlog.common.clock import SYSTEM_CLOCK
from riverlog.common.errors import ErrorCode
from riverlog.common.metrics.rpc import RequestTimer
from riverlog.common.produce_request_parse import ParsedProduceRequest
from riverlog.v1 import data_pb2, storage_pb2, storage_pb2_grpc

from ..replica.fetch import FetchHandler, close_results
from ..replica.offsets import OffsetsHandler
from ..replica.produce import PendingProduce, ProduceHandler
from ..replica.requests import Acks
from .convert import (
    delete_records_from_proto,
    delete_records_response_to_proto,
    describe_log_dirs_to_proto,
    fetch_params_from_proto,
    fetch_response_to_proto,
    list_offsets_from_proto,
    list_offsets_response_to_proto,
    marker_params_from_proto,
    offsets_for_leader_epoch_from_proto,
    offsets_for_leader_epoch_response_to_proto,
    produce_params_from_parsed,
    produce_params_from_proto,
    produce_response_to_proto,
)
from .timers import RequestTimers

log = logging.getLogger(__name__)

SERVICE_NAME = "riverlog.v1.StorageService"
# Acknowledgements a stream may have outstanding before it stops reading requests.
_STREAM_MAX_IN_FLIGHT = 1024


class StorageServicer(storage_pb2_grpc.StorageServiceServicer):
    METRICS_TIMED_INSIDE = frozenset({"Produce", "Fetch"})  # per request: `timers.py`

    def __init__(
        self,
        node_id: int,
        produce: ProduceHandler,
        fetch: FetchHandler,
        offsets: OffsetsHandler,
    ) -> None:
        self._node_id = node_id
        self._produce = produce
        self._fetch = fetch
        self._offsets = offsets
        self._timers = RequestTimers()

    async def Produce(
        self, request: data_pb2.ProduceRequest, context: Any
    ) -> data_pb2.ProduceResponse:
        return await self.produce(request)

    async def produce(self, request: data_pb2.ProduceRequest) -> data_pb2.ProduceResponse:
        """Produce, whichever transport it came by (gRPC or the zero-copy channel)."""
        return await self.start_produce(request)

    def start_produce(
        self, request: data_pb2.ProduceRequest | ParsedProduceRequest
    ) -> Awaitable[data_pb2.ProduceResponse]:
        """Appends now (so a transport that calls this in arrival order appends in that order)
        and returns what waits for the acknowledgement. The zero-copy channel gives its frames
        read by hand (`ParsedProduceRequest`, records as views of the frame)."""
        start = RequestTimer.start()
        if isinstance(request, ParsedProduceRequest):
            params = produce_params_from_parsed(request)
        else:
            params = produce_params_from_proto(request)
        pending = self._produce.append(params)
        if pending.acks is not Acks.NONE and not pending.deferred and not pending.waiting:
            # acks=1 (or refused): the answer is known now. A done future lets a transport
            # send it at once instead of through a task and another loop turn.
            self._timers.produce.done(start)
            ready: asyncio.Future[data_pb2.ProduceResponse] = (
                asyncio.get_running_loop().create_future()
            )
            ready.set_result(produce_response_to_proto(pending.results, request.correlation_id))
            return ready
        return self._acknowledged(pending, request.correlation_id, start)

    async def _acknowledged(
        self, pending: PendingProduce, correlation_id: int, start: float
    ) -> data_pb2.ProduceResponse:
        if pending.acks is Acks.NONE:
            if pending.deferred:  # KIP-890: appended once verified
                await self._produce.finish_deferred(pending)
            self._timers.produce.done(start)
            if all(r.error == ErrorCode.NONE for r in pending.results):
                return data_pb2.ProduceResponse(correlation_id=correlation_id)
            # A refused acks=0 append is reported to the gateway (not to the client, as Kafka
            # reports nothing): a gateway that routed by a stale image retries at the leader
            # instead of losing the records (a new topic whose leader had not yet taken over).
            return produce_response_to_proto(pending.results, correlation_id)
        results = await self._produce.complete(pending)
        self._timers.produce.done(start)
        return produce_response_to_proto(results, correlation_id)

    async def ProduceStream(
        self, request_iterator: AsyncIterator[data_pb2.ProduceRequest], context: Any
    ) -> AsyncIterator[data_pb2.ProduceResponse]:
        out: asyncio.Queue[data_pb2.ProduceResponse | None] = asyncio.Queue()
        slots = asyncio.Semaphore(_STREAM_MAX_IN_FLIGHT)
        tasks: set[asyncio.Task[None]] = set()

        async def acknowledge(pending: PendingProduce, correlation_id: int, start: float) -> None:
            try:
                results = await self._produce.complete(pending)
                self._timers.produce.done(start)
                await out.put(produce_response_to_proto(results, correlation_id))
            finally:
                slots.release()

        async def read_requests() -> None:
            try:
                async for request in request_iterator:
                    start = RequestTimer.start()
                    params = produce_params_from_proto(request)
                    await slots.acquire()
                    pending = self._produce.append(params)  # in arrival order
                    if params.acks is Acks.NONE:
                        slots.release()
                        continue
                    task = asyncio.create_task(acknowledge(pending, request.correlation_id, start))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                if tasks:
                    await asyncio.gather(*list(tasks))
            finally:
                await out.put(None)

        reader = asyncio.create_task(read_requests())
        try:
            while (response := await out.get()) is not None:
                yield response
            await reader  # re-raise a failure of the request side
        finally:
            reader.cancel()
            for task in list(tasks):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader

    async def Fetch(self, request: data_pb2.FetchRequest, context: Any) -> data_pb2.FetchResponse:
        start = RequestTimer.start()
        params = fetch_params_from_proto(request)
        results = await self._fetch.fetch(params)
        try:
            return fetch_response_to_proto(results, request.correlation_id)
        finally:
            close_results(results)
            self._timers.fetch(params.replica_id).done(start)

    async def ListOffsets(
        self, request: data_pb2.ListOffsetsRequest, context: Any
    ) -> data_pb2.ListOffsetsResponse:
        results = await self._offsets.list_offsets_with_remote(list_offsets_from_proto(request))
        return list_offsets_response_to_proto(results)

    async def WriteTxnMarkers(
        self, request: storage_pb2.WriteTxnMarkersRequest, context: Any
    ) -> storage_pb2.WriteTxnMarkersResponse:
        params = marker_params_from_proto(request, SYSTEM_CLOCK.time_ms())
        [result] = await self._produce.complete(self._produce.append(params))
        return storage_pb2.WriteTxnMarkersResponse(
            error_code=int(result.error),  # type: ignore[arg-type]
            error_message=result.error_message,
            offset=result.base_offset,
        )

    async def DeleteRecords(
        self, request: data_pb2.DeleteRecordsRequest, context: Any
    ) -> data_pb2.DeleteRecordsResponse:
        results = self._offsets.delete_records(delete_records_from_proto(request))
        return delete_records_response_to_proto(results)

    async def DescribeLogDirs(
        self, request: storage_pb2.DescribeLogDirsRequest, context: Any
    ) -> storage_pb2.DescribeLogDirsResponse:
        replicas = self._offsets.replicas
        return describe_log_dirs_to_proto(
            self._node_id,
            self._offsets.describe_log_dirs(),
            isr_shrinks=replicas.isr_shrinks,
            isr_expands=replicas.isr_expands,
            under_replicated_partitions=replicas.under_replicated_partitions,
        )

    async def OffsetsForLeaderEpoch(
        self, request: storage_pb2.OffsetsForLeaderEpochRequest, context: Any
    ) -> storage_pb2.OffsetsForLeaderEpochResponse:
        results = self._offsets.offsets_for_leader_epoch(
            offsets_for_leader_epoch_from_proto(request)
        )
        return offsets_for_leader_epoch_response_to_proto(results)
