"""A follower's client of one leader storage node: fetches over the leader's zero-copy channel
(the stored batches arrive by `os.sendfile` on the leader's side, with no protobuf copy of the
records), or over gRPC Fetch when the leader has no zero-copy port or the node is configured
without it (`replica.fetch.zero.copy.enable=false`); OffsetsForLeaderEpoch over gRPC.

The replica fetcher talks to this through its `LeaderEndpoint` protocol, in plain values; the
conversions to and from the protos are here. Failures come back as RiverlogError, a call cut
by the leader leaving the cluster or restarting (its channel closed under the call) as
NETWORK_EXCEPTION, so the fetcher backs off and tries again instead of its task ending.
"""

from __future__ import annotations

import logging
from typing import TypeAlias

import grpc

from riverlog.common.cluster import NodeInfo
from riverlog.common.errors import ErrorCode, code_of
from riverlog.common.rpc.channels import ChannelCache, closed_channel_raises
from riverlog.common.rpc.status import from_rpc_error
from riverlog.common.types import TopicPartition
from riverlog.common.zerocopy import AsyncZeroCopyFetchClient
from riverlog.v1 import data_pb2, storage_pb2, storage_pb2_grpc

from ..replica.requests import (
    EpochEndOffsetData,
    EpochEndOffsetResult,
    FetchParams,
    FollowerFetchResult,
)

log = logging.getLogger(__name__)

_RPC_TIMEOUT_S = 30.0


def fetch_request_to_proto(params: FetchParams) -> data_pb2.FetchRequest:
    request = data_pb2.FetchRequest(
        max_wait_ms=params.max_wait_ms,
        min_bytes=params.min_bytes,
        max_bytes=params.max_bytes,
        correlation_id=params.correlation_id,
    )
    if params.replica_id is not None:
        request.replica_id = params.replica_id
    for p in params.partitions:
        part = request.partitions.add(
            topic=p.tp.topic,
            partition=p.tp.partition,
            fetch_offset=p.fetch_offset,
            partition_max_bytes=p.partition_max_bytes,
            log_start_offset=p.log_start_offset,
        )
        if p.current_leader_epoch is not None:
            part.current_leader_epoch = p.current_leader_epoch
        if p.last_fetched_epoch is not None:
            part.last_fetched_epoch = p.last_fetched_epoch
        if p.known_high_watermark is not None:
            part.known_high_watermark = p.known_high_watermark
    return request


def follower_results_from_proto(
    response: data_pb2.FetchResponse, raw: bytes | bytearray | None = None
) -> list[FollowerFetchResult]:
    """The results; with `raw` (the zero-copy channel's bytes after the header) each
    partition's records are a slice of it, not a copy."""
    view = memoryview(raw) if raw is not None else None
    pos = 0
    results: list[FollowerFetchResult] = []
    for p in response.partitions:
        records: bytes | memoryview = p.records
        if view is not None:
            records = view[pos : pos + p.zero_copy_records_size]
            pos += p.zero_copy_records_size
        results.append(
            FollowerFetchResult(
                tp=TopicPartition(p.topic, p.partition),
                error=code_of(p.error_code),
                error_message=p.error_message,
                high_watermark=p.high_watermark,
                log_start_offset=p.log_start_offset,
                log_end_offset=p.log_end_offset,
                records=records,
            )
        )
    return results


LeaderChannels: TypeAlias = ChannelCache["storage_pb2_grpc.StorageServiceAsyncStub"]
"""The node's gRPC channels to other storage nodes, shared by every fetcher (made by the app)."""


def leader_channels() -> LeaderChannels:
    return ChannelCache(storage_pb2_grpc.StorageServiceStub, "leader")


class LeaderClient:
    """Lifecycle: one per (follower node, leader incarnation), used from the fetcher's task;
    `await close()` when the fetcher stops (closes its zero-copy connection; the gRPC channel
    is the node's shared one, in `channels`)."""

    def __init__(self, leader: NodeInfo, channels: LeaderChannels, zero_copy: bool = True) -> None:
        self.leader = leader
        self._stub = channels.stub(leader)
        self._peer = f"leader {leader.node_id} at {leader.address}"
        self._zero_copy: AsyncZeroCopyFetchClient | None = None
        if zero_copy and leader.zero_copy_port > 0:
            self._zero_copy = AsyncZeroCopyFetchClient(leader.host, leader.zero_copy_port)
        self.bytes_fetched = 0

    @property
    def uses_zero_copy(self) -> bool:
        return self._zero_copy is not None

    async def fetch(self, params: FetchParams) -> list[FollowerFetchResult]:
        request = fetch_request_to_proto(params)
        if self._zero_copy is not None:
            response, raw = await self._zero_copy.fetch_raw(request)
            results = follower_results_from_proto(response, raw)
        else:
            try:
                with closed_channel_raises(ErrorCode.NETWORK_EXCEPTION, self._peer):
                    response = await self._stub.Fetch(
                        request, timeout=_RPC_TIMEOUT_S + params.max_wait_ms / 1000.0
                    )
            except grpc.RpcError as exc:
                raise from_rpc_error(exc) from None
            results = follower_results_from_proto(response)
        self.bytes_fetched += sum(len(r.records) for r in results)
        return results

    async def offsets_for_leader_epoch(
        self, replica_id: int, partitions: list[EpochEndOffsetData]
    ) -> list[EpochEndOffsetResult]:
        request = storage_pb2.OffsetsForLeaderEpochRequest(replica_id=replica_id)
        for p in partitions:
            part = request.partitions.add(
                topic=p.tp.topic, partition=p.tp.partition, leader_epoch=p.leader_epoch
            )
            if p.current_leader_epoch is not None:
                part.current_leader_epoch = p.current_leader_epoch
        try:
            with closed_channel_raises(ErrorCode.NETWORK_EXCEPTION, self._peer):
                response = await self._stub.OffsetsForLeaderEpoch(request, timeout=_RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None
        return [
            EpochEndOffsetResult(
                tp=TopicPartition(r.topic, r.partition),
                error=code_of(r.error_code),
                error_message=r.error_message,
                leader_epoch=r.leader_epoch,
                end_offset=r.end_offset,
            )
            for r in response.partitions
        ]

    async def close(self) -> None:
        if self._zero_copy is not None:
            await self._zero_copy.close()
