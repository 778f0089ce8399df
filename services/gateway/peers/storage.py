"""Typed calls to storage nodes (StorageService) for the gateway's request families.

One asyncio gRPC channel per storage node (the shared `ChannelCache`: opened on first use and
reused by every request, replaced when the node restarts, closed when it leaves the cluster).
Every call carries the request's remaining time as its deadline and the client id in
`riverlog-client-id`; calls are made from the request's own task, so the tracing interceptor
of the shared channel makes each one a child of the incoming call's span.
Failures come back as RiverlogError (rebuilt from the status and its code trailer), never as
grpc errors.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import grpc

from riverlog.common import tracing
from riverlog.common.cluster import NodeInfo
from riverlog.common.cluster.image import NodeKey
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.common.rpc.channels import ChannelCache, Rpcs, closed_channel_raises, pick
from riverlog.common.rpc.convert import (
    acks_to_proto,
    isolation_level_to_proto,
    offset_spec_to_proto,
)
from riverlog.common.rpc.status import from_rpc_error
from riverlog.common.types import Acks, IsolationLevel, TopicPartition
from riverlog.common.zerocopy import ProduceFramePart
from riverlog.v1 import data_pb2, storage_pb2, storage_pb2_grpc

from ..context import Deadline, current_request
from ..fetch import FetchOptions, FetchPart, FetchPartResult
from ..log_dirs import LogDirInfo, ReplicaLogInfo
from ..offsets import (
    DeleteRecordsPart,
    DeleteRecordsPartResult,
    ListOffsetsPart,
    ListOffsetsPartResult,
)
from ..produce import ProduceOptions, ProducePart, ProducePartResult
from ..routing.router import Routed
from .zero_copy import ZeroCopyPool

log = logging.getLogger(__name__)

STORAGE_RPCS: Final[Rpcs[storage_pb2_grpc.StorageServiceAsyncStub]] = {
    "Produce": lambda s: s.Produce,
    "Fetch": lambda s: s.Fetch,
    "ListOffsets": lambda s: s.ListOffsets,
    "DeleteRecords": lambda s: s.DeleteRecords,
    "DescribeLogDirs": lambda s: s.DescribeLogDirs,
}
"""The calls the gateway's families make on a leader."""

_R = TypeVar("_R")
_V = TypeVar("_V")
_P = TypeVar("_P", bound=Routed)


class StoragePeers:
    """Clients of every storage node. Lifecycle: one per gateway process, used from its event
    loop; `close()` at shutdown. Implements the families' sender protocols."""

    def __init__(self, zero_copy: bool = True) -> None:
        """`zero_copy`: fetches go over the leaders' zero-copy channels (decision 0018) unless
        tracing is on (only gRPC carries the trace context) or a node has no zero-copy port;
        gRPC otherwise, and for every other call."""
        self.channels: ChannelCache[storage_pb2_grpc.StorageServiceAsyncStub] = ChannelCache(
            storage_pb2_grpc.StorageServiceStub, "storage node"
        )
        self.zero_copy = ZeroCopyPool() if zero_copy else None

    async def prune(self, live: Iterable[NodeKey]) -> None:
        """Close the channels of nodes no longer in the cluster."""
        keys = list(live)
        await self.channels.prune(keys)
        if self.zero_copy is not None:
            await self.zero_copy.prune(keys)

    async def close(self) -> None:
        await self.channels.close()
        if self.zero_copy is not None:
            await self.zero_copy.close()

    def _fast(self, node: NodeInfo) -> ZeroCopyPool | None:
        if self.zero_copy is None or node.zero_copy_port <= 0 or tracing.enabled():
            return None
        return self.zero_copy

    async def _fast_call(
        self,
        node: NodeInfo,
        exchange: Callable[[float], Awaitable[_R]],
        deadline: Deadline,
    ) -> _R:
        """`exchange(timeout)` over `node`'s zero-copy port within the request's deadline;
        failures as RiverlogError naming the node."""
        try:
            return await exchange(_remaining(deadline))
        except RiverlogError as exc:
            raise RiverlogError(
                f"storage node {node.node_id} at {node.host}:{node.zero_copy_port}: {exc.message}",
                exc.code,
            ) from None

    async def _call(self, node: NodeInfo, method: str, request: Any, deadline: Deadline) -> Any:
        timeout = _remaining(deadline)
        ctx = current_request.get()
        metadata = ((CLIENT_ID_KEY, ctx.client_id),) if ctx is not None else None
        try:
            rpc = pick(STORAGE_RPCS, self.channels.stub(node), method)
            # A channel closed under the call (the node left the cluster or restarted):
            # retriable, so the router moves on to the new leader instead of the client
            # waiting out its request timeout.
            with closed_channel_raises(
                ErrorCode.NETWORK_EXCEPTION, f"storage node {node.node_id} at {node.address}"
            ):
                return await rpc(request, timeout=timeout, metadata=metadata)
        except grpc.RpcError as exc:
            error = from_rpc_error(exc)
            raise RiverlogError(
                f"storage node {node.node_id} at {node.address}: {error.message}", error.code
            ) from None

    # --- the families' senders ----------------------------------------------------------------

    async def produce(
        self,
        node: NodeInfo,
        options: ProduceOptions,
        parts: list[ProducePart],
        deadline: Deadline,
    ) -> list[ProducePartResult]:
        acks = acks_to_proto(_checked(options.acks, "acks value"))
        # The leader's produce lane (one pipelined connection: requests arrive, and are
        # appended, in the order they were sent, as on gRPC's one HTTP/2 connection), or gRPC
        # where the lane cannot serve (decision 0018). The lane's frame is encoded from the
        # parts directly: no message, one copy of the records (decision 0015's addendum).
        fast = self._fast(node)
        response = None
        if fast is not None:
            lane_parts: list[ProduceFramePart] = [
                (p.tp.topic, p.tp.partition, p.records, p.current_leader_epoch) for p in parts
            ]

            async def on_lane(timeout: float) -> data_pb2.ProduceResponse:
                assert fast is not None
                lane = await fast.lane(node)
                return await lane.produce_parts(
                    acks, options.timeout_ms, options.transactional_id, lane_parts, timeout
                )

            try:
                response = await self._fast_call(node, on_lane, deadline)
            except RiverlogError as exc:
                if exc.code != ErrorCode.MESSAGE_TOO_LARGE:
                    raise
                # over the lane's 16 MiB frame (refused before anything was sent): gRPC
        if response is None:
            request = data_pb2.ProduceRequest(
                acks=acks, timeout_ms=options.timeout_ms, transactional_id=options.transactional_id
            )
            for part in parts:
                _produce_part_to_proto(part, request.partitions.add())
            response = await self._call(node, "Produce", request, deadline)
        if options.acks == Acks.NONE and not response.partitions:
            # acks=0: the leader took the request and, as Kafka, acknowledges nothing.
            return [ProducePartResult(p.tp) for p in parts]
        return _aligned(
            node, parts, response.partitions, _produce_result_from_proto, ProducePartResult.failed
        )

    async def fetch(
        self, node: NodeInfo, options: FetchOptions, parts: list[FetchPart], deadline: Deadline
    ) -> list[FetchPartResult]:
        request = data_pb2.FetchRequest(
            max_wait_ms=options.max_wait_ms,
            min_bytes=options.min_bytes,
            max_bytes=options.max_bytes,
            isolation_level=isolation_level_to_proto(
                _checked(options.isolation_level, "isolation level")
            ),
            partitions=[_fetch_part_to_proto(p) for p in parts],
            rack_id=options.rack_id,
        )
        fast = self._fast(node)
        if fast is None:
            response = await self._call(node, "Fetch", request, deadline)
            return _aligned(
                node, parts, response.partitions, _fetch_result_from_proto, FetchPartResult.failed
            )
        answer, raw = await self._fast_call(
            node,
            lambda timeout: fast.call(node, lambda client: client.fetch_raw(request, timeout)),
            deadline,
        )
        return _aligned(
            node, parts, _with_records(answer, raw), _fetch_result_of, FetchPartResult.failed
        )

    async def list_offsets(
        self,
        node: NodeInfo,
        isolation_level: IsolationLevel,
        parts: list[ListOffsetsPart],
        deadline: Deadline,
    ) -> list[ListOffsetsPartResult]:
        request = data_pb2.ListOffsetsRequest(
            isolation_level=isolation_level_to_proto(isolation_level),
            partitions=[_list_offsets_part_to_proto(p) for p in parts],
        )
        response = await self._call(node, "ListOffsets", request, deadline)
        return _aligned(
            node,
            parts,
            response.partitions,
            _list_offsets_result_from_proto,
            ListOffsetsPartResult.failed,
        )

    async def delete_records(
        self, node: NodeInfo, timeout_ms: int, parts: list[DeleteRecordsPart], deadline: Deadline
    ) -> list[DeleteRecordsPartResult]:
        request = data_pb2.DeleteRecordsRequest(
            timeout_ms=timeout_ms,
            partitions=[
                data_pb2.DeleteRecordsPartition(
                    topic=p.tp.topic, partition=p.tp.partition, offset=p.offset
                )
                for p in parts
            ],
        )
        response = await self._call(node, "DeleteRecords", request, deadline)
        return _aligned(
            node,
            parts,
            response.partitions,
            _delete_records_result_from_proto,
            DeleteRecordsPartResult.failed,
        )

    async def describe_log_dirs(self, node: NodeInfo, deadline: Deadline) -> list[LogDirInfo]:
        """Every log dir of `node` with the replicas in it (DescribeLogDirs; `log_dirs.py`)."""
        request = storage_pb2.DescribeLogDirsRequest()
        response = await self._call(node, "DescribeLogDirs", request, deadline)
        return [_log_dir_from_proto(d) for d in response.log_dirs]


def _remaining(deadline: Deadline) -> float:
    timeout = deadline.remaining()
    if timeout <= 0:
        raise RiverlogError(
            "the request deadline passed before the leader could be asked",
            ErrorCode.REQUEST_TIMED_OUT,
        )
    return timeout


def _checked(value: _V | None, what: str) -> _V:
    """A request option the families checked before sending (None, unknown, never gets here)."""
    if value is None:
        raise RiverlogError(f"unknown {what}", ErrorCode.INVALID_REQUEST)
    return value


def _aligned(
    node: NodeInfo,
    parts: Sequence[_P],
    answers: Iterable[Any],
    convert: Callable[[TopicPartition, Any], _R],
    failed: Callable[[_P, RiverlogError], _R],
) -> list[_R]:
    """The leader's per-partition answers in the order of `parts`, matched by topic and
    partition; a partition it left out gets UNKNOWN_SERVER_ERROR."""
    by_tp = {(a.topic, a.partition): a for a in answers}
    out: list[_R] = []
    for part in parts:
        tp = part.tp
        answer = by_tp.get((tp.topic, tp.partition))
        if answer is None:
            error = RiverlogError(
                f"storage node {node.node_id} returned no result for {tp}",
                ErrorCode.UNKNOWN_SERVER_ERROR,
            )
            out.append(failed(part, error))
        else:
            out.append(convert(tp, answer))
    return out


# --- converters ---------------------------------------------------------------------------------


def _produce_part_to_proto(part: ProducePart, msg: data_pb2.ProducePartition) -> None:
    """Fill `msg`, already in its request: nesting a built message would copy the batch again."""
    msg.topic = part.tp.topic
    msg.partition = part.tp.partition
    msg.records = bytes(part.records)  # a view into the client's request: protobuf takes bytes
    if part.current_leader_epoch is not None:
        msg.current_leader_epoch = part.current_leader_epoch


def _produce_result_from_proto(
    tp: TopicPartition, msg: data_pb2.ProducePartitionResponse
) -> ProducePartResult:
    return ProducePartResult(
        tp,
        int(msg.error_code),
        msg.error_message,
        msg.base_offset,
        msg.log_append_time_ms,
        msg.log_start_offset,
        msg.last_offset,
    )


def _fetch_part_to_proto(part: FetchPart) -> data_pb2.FetchPartition:
    msg = data_pb2.FetchPartition(
        topic=part.tp.topic,
        partition=part.tp.partition,
        fetch_offset=part.fetch_offset,
        partition_max_bytes=part.partition_max_bytes,
    )
    if part.current_leader_epoch is not None:
        msg.current_leader_epoch = part.current_leader_epoch
    return msg


def _fetch_result_from_proto(
    tp: TopicPartition, msg: data_pb2.FetchPartitionResponse
) -> FetchPartResult:
    return FetchPartResult(
        tp,
        int(msg.error_code),
        msg.error_message,
        msg.high_watermark,
        msg.last_stable_offset,
        msg.log_start_offset,
        msg.records,
        msg.log_end_offset,
        _aborted_of(msg),
    )


def _aborted_of(msg: data_pb2.FetchPartitionResponse) -> tuple[tuple[int, int], ...]:
    return tuple((a.producer_id, a.first_offset) for a in msg.aborted_transactions)


@dataclass(frozen=True, slots=True)
class _RawAnswer:
    """A zero-copy fetch answer's partition with its records cut from the raw bytes."""

    msg: data_pb2.FetchPartitionResponse
    records: bytes | memoryview

    @property
    def topic(self) -> str:
        return self.msg.topic

    @property
    def partition(self) -> int:
        return self.msg.partition


def _with_records(response: data_pb2.FetchResponse, raw: bytes | bytearray) -> list[_RawAnswer]:
    """Each partition of a zero-copy answer with its share of the raw bytes that followed it:
    a view each, so the bytes read are copied once, by the answer's splice (`fetch_to_wire`)."""
    answers: list[_RawAnswer] = []
    view = memoryview(raw)
    pos = 0
    for msg in response.partitions:
        size = msg.zero_copy_records_size
        answers.append(_RawAnswer(msg, view[pos : pos + size] if size else b""))
        pos += size
    return answers


def _fetch_result_of(tp: TopicPartition, answer: _RawAnswer) -> FetchPartResult:
    msg = answer.msg
    return FetchPartResult(
        tp,
        int(msg.error_code),
        msg.error_message,
        msg.high_watermark,
        msg.last_stable_offset,
        msg.log_start_offset,
        answer.records,
        msg.log_end_offset,
        _aborted_of(msg),
    )


def _list_offsets_part_to_proto(part: ListOffsetsPart) -> data_pb2.ListOffsetsPartition:
    msg = data_pb2.ListOffsetsPartition(
        topic=part.tp.topic,
        partition=part.tp.partition,
        spec=offset_spec_to_proto(_checked(part.spec, "offset spec")),
        timestamp_ms=part.timestamp_ms,
    )
    if part.current_leader_epoch is not None:
        msg.current_leader_epoch = part.current_leader_epoch
    return msg


def _list_offsets_result_from_proto(
    tp: TopicPartition, msg: data_pb2.ListOffsetsPartitionResponse
) -> ListOffsetsPartResult:
    return ListOffsetsPartResult(
        tp, int(msg.error_code), msg.error_message, msg.timestamp_ms, msg.offset, msg.leader_epoch
    )


def _delete_records_result_from_proto(
    tp: TopicPartition, msg: data_pb2.DeleteRecordsPartitionResponse
) -> DeleteRecordsPartResult:
    return DeleteRecordsPartResult(tp, int(msg.error_code), msg.error_message, msg.low_watermark)


def _log_dir_from_proto(msg: storage_pb2.DescribeLogDirsResponse.LogDir) -> LogDirInfo:
    return LogDirInfo(
        msg.path,
        tuple(
            ReplicaLogInfo(
                TopicPartition(p.topic, p.partition),
                size_bytes=p.size_bytes,
                log_start_offset=p.log_start_offset,
                local_log_start_offset=p.local_log_start_offset,
                log_end_offset=p.log_end_offset,
                remote_size_bytes=p.remote_size_bytes,
                offset_lag=p.offset_lag,
                is_future=p.is_future,
            )
            for p in msg.partitions
        ),
        int(msg.error_code),
        msg.error_message,
    )
