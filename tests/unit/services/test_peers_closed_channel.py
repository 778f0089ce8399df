"""Peer clients whose channel is closed under an in-flight call (the node left the cluster:
ChannelCache.prune; or this process stops: close) fail it with the retriable error their
caller acts on, or, in a background loop, count the peer as unreachable, instead of letting
grpc.aio's asyncio.CancelledError end the handler or the loop. The gateway's coordinator and
storage peers are in gateway/test_gateway_peers_prune.py, the shared wrapper in
common/rpc/test_closed_channel_raises.py. Real loopback servers that hold the call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota import LocalQuotaView, QuotaResolver, QuotaType
from riverlog.common.rpc.server import RpcServer
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.peers.storage import StorageClient
from riverlog.services.gateway.peers.quota import QuotaReporter
from riverlog.services.metadata.peers.controller import ControllerPeer
from riverlog.services.storage.peers.leader import LeaderClient, leader_channels
from riverlog.services.storage.replica.requests import FetchParams, FetchPartitionData
from riverlog.v1 import (
    admin_pb2,
    metadata_pb2_grpc,
    quota_pb2_grpc,
    storage_pb2_grpc,
)


class _Holds:
    """A servicer method that takes the call and never answers (a node SIGSTOP'd, or one
    stopping while it unregisters)."""

    def __init__(self) -> None:
        self.received = asyncio.Event()

    async def _hold(self, request: Any, context: Any) -> Any:
        self.received.set()
        await asyncio.sleep(3600)


class _Storage(_Holds, storage_pb2_grpc.StorageServiceServicer):
    Fetch = _Holds._hold


class _Quota(_Holds, quota_pb2_grpc.QuotaServiceServicer):
    ReportUsage = _Holds._hold


class _Metadata(_Holds, metadata_pb2_grpc.MetadataServiceServicer):
    CreateTopics = _Holds._hold


Held = Callable[[Callable[[], Awaitable[Any]]], Awaitable["asyncio.Task[Any]"]]


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[tuple[int, Held]]]]:
    """`port, held = await serve(add, servicer, name)`: a started loopback server;
    `await held(lambda: call)` starts the call as a task and returns it once the server has
    it. Stops the servers and the calls left over afterwards."""
    servers: list[RpcServer] = []
    calls: list[asyncio.Task[Any]] = []

    async def start(add: Any, servicer: _Holds, name: str) -> tuple[int, Held]:
        server = RpcServer("127.0.0.1", 0, [(add, servicer, name)])
        await server.start()
        servers.append(server)

        async def held(call: Callable[[], Awaitable[Any]]) -> asyncio.Task[Any]:
            async def run() -> Any:
                return await call()

            task = asyncio.create_task(run())
            calls.append(task)
            await asyncio.wait_for(servicer.received.wait(), 10)
            return task

        return server.port, held

    try:
        yield start
    finally:
        for task in calls:
            task.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        for server in servers:
            await server.stop(0)


def _node(kind: str, node_id: int, port: int) -> NodeInfo:
    return NodeInfo(kind=kind, node_id=node_id, host="127.0.0.1", port=port)


@pytest.mark.timeout(30)
async def test_a_followers_fetch_from_a_leader_that_left_is_a_network_exception(serve) -> None:
    """The replica fetcher backs off and tries again on a RiverlogError; CancelledError from
    the cut call used to end its task."""
    servicer = _Storage()
    port, held = await serve(
        storage_pb2_grpc.add_StorageServiceServicer_to_server,
        servicer,
        "riverlog.v1.StorageService",
    )
    channels = leader_channels()
    client = LeaderClient(_node("storage", 2, port), channels, zero_copy=False)
    params = FetchParams([FetchPartitionData(TopicPartition("t", 0), 0)], replica_id=1)
    try:
        call = await held(lambda: client.fetch(params))
        await channels.prune([])  # the leader left the cluster image
        with pytest.raises(RiverlogError) as info:
            await asyncio.wait_for(call, 5)
        assert info.value.code is ErrorCode.NETWORK_EXCEPTION
        assert info.value.retriable
    finally:
        await client.close()
        await channels.close()


@pytest.mark.timeout(30)
async def test_a_coordinators_read_from_a_leader_that_left_is_a_network_exception(serve) -> None:
    """Loading a `__consumer_offsets` partition: the shard retries a retriable error at the
    partition's next leader."""
    servicer = _Storage()
    port, held = await serve(
        storage_pb2_grpc.add_StorageServiceServicer_to_server,
        servicer,
        "riverlog.v1.StorageService",
    )
    node = _node("storage", 2, port)
    client = StorageClient(ClusterImage.empty)
    client._leader = lambda partition, topic=None: node  # type: ignore[method-assign]
    try:
        call = await held(lambda: anext(client.read(0)))
        await client.channels.prune([])
        with pytest.raises(RiverlogError) as info:
            await asyncio.wait_for(call, 5)
        assert info.value.code is ErrorCode.NETWORK_EXCEPTION
    finally:
        await client.close()


@pytest.mark.timeout(30)
async def test_a_quota_report_cut_by_the_instance_leaving_waits_for_the_next_one(serve) -> None:
    """The reporter's task goes on (CancelledError used to end it: no more reports) and the
    usage of the cut report goes into the next one."""
    servicer = _Quota()
    port, held = await serve(
        quota_pb2_grpc.add_QuotaServiceServicer_to_server, servicer, "riverlog.v1.QuotaService"
    )
    node = _node("quota", 5, port)
    clock = ManualClock(0)
    resolver = QuotaResolver.from_paths({"/config/clients/<default>": {"producer_byte_rate": 1e9}})
    view = LocalQuotaView("gw", resolver, clock)
    reporter = QuotaReporter(view, ClusterImage.empty, clock)
    view.record_local(QuotaType.PRODUCE, None, "c1", 100.0)
    part = view.drain_report()
    assert part.deltas
    try:
        call = await held(lambda: reporter._send(node, part))
        await reporter.channels.prune([])
        await asyncio.wait_for(call, 5)  # no exception: the instance is unreachable
        again = view.drain_report()
        assert again.deltas == part.deltas
        assert node.node_id in reporter._unreachable
    finally:
        await reporter.channels.close()


@pytest.mark.timeout(30)
async def test_a_forwarded_write_cut_by_this_instance_stopping_is_not_controller(serve) -> None:
    """The standby forwarding a write closes its channels when it stops: the client is told
    NOT_CONTROLLER (it retries elsewhere) instead of the handler being cancelled."""
    servicer = _Metadata()
    port, held = await serve(
        metadata_pb2_grpc.add_MetadataServiceServicer_to_server,
        servicer,
        "riverlog.v1.MetadataService",
    )
    peer = ControllerPeer(timeout_s=20)
    request = admin_pb2.CreateTopicsRequest()
    call = await held(lambda: peer.forward(f"127.0.0.1:{port}", "CreateTopics", request))
    await peer.close()
    with pytest.raises(RiverlogError) as info:
        await asyncio.wait_for(call, 5)
    assert info.value.code is ErrorCode.NOT_CONTROLLER
    assert info.value.retriable
