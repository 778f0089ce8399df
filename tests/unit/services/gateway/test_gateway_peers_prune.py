"""A storage node that leaves the cluster while a call to it is in flight (paused past its
lease): pruning its channel must fail the call with a retriable error at once, so the router
moves on to the new leader, instead of cancelling the gateway's handler and leaving the client
to wait out its request timeout (found by the pause-leader fault test). The same for a
coordinator instance removed while a group's commit is in flight to it (found by the cluster
shape test that adds and removes a coordinator under a consuming group)."""

import asyncio

import pytest

from riverlog.common.cluster import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.server import RpcServer
from riverlog.services.gateway.context import Deadline
from riverlog.services.gateway.peers.coordinator import CoordinatorPeers
from riverlog.services.gateway.peers.storage import StoragePeers
from riverlog.v1 import coordinator_pb2, coordinator_pb2_grpc, data_pb2, storage_pb2_grpc


class _PausedLeader(storage_pb2_grpc.StorageServiceServicer):
    """Takes a produce and never answers, like a SIGSTOP'd node."""

    def __init__(self) -> None:
        self.received = asyncio.Event()

    async def Produce(self, request, context):
        self.received.set()
        await asyncio.sleep(3600)


@pytest.fixture
async def paused_leader():
    """A real loopback storage server that never answers Produce, with a StoragePeers and an
    in-flight Produce call to it; stops everything afterwards."""
    servicer = _PausedLeader()
    add = storage_pb2_grpc.add_StorageServiceServicer_to_server
    server = RpcServer("127.0.0.1", 0, [(add, servicer, "riverlog.v1.StorageService")])
    await server.start()
    peers = StoragePeers()
    node = NodeInfo(kind="storage", node_id=1, host="127.0.0.1", port=server.port)
    call = asyncio.create_task(
        peers._call(node, "Produce", data_pb2.ProduceRequest(), Deadline.after(20))
    )
    try:
        await asyncio.wait_for(servicer.received.wait(), 10)
        yield peers, call
    finally:
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        await peers.close()
        await server.stop(0)


@pytest.mark.timeout(30)
async def test_pruning_a_node_fails_its_in_flight_calls_as_retriable(paused_leader) -> None:
    peers, call = paused_leader
    await peers.prune([])  # the node's lease lapsed: it is no longer in the image
    with pytest.raises(RiverlogError) as info:
        await asyncio.wait_for(call, 5)
    assert info.value.code is ErrorCode.NETWORK_EXCEPTION
    assert info.value.retriable


@pytest.mark.timeout(30)
async def test_a_cancelled_caller_is_still_cancelled(paused_leader) -> None:
    _, call = paused_leader
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


class _LeavingCoordinator(coordinator_pb2_grpc.CoordinatorServicer):
    """Takes a commit and never answers (its shard is stopping while it unregisters)."""

    def __init__(self) -> None:
        self.received = asyncio.Event()

    async def OffsetCommit(self, request, context):
        self.received.set()
        await asyncio.sleep(3600)


@pytest.fixture
async def leaving_coordinator():
    """A real loopback coordinator server that never answers OffsetCommit, with a
    CoordinatorPeers and an in-flight OffsetCommit call to it; stops everything afterwards."""
    servicer = _LeavingCoordinator()
    add = coordinator_pb2_grpc.add_CoordinatorServicer_to_server
    server = RpcServer("127.0.0.1", 0, [(add, servicer, "riverlog.v1.Coordinator")])
    await server.start()
    peers = CoordinatorPeers()
    node = NodeInfo(kind="coordinator", node_id=3, host="127.0.0.1", port=server.port)
    request = coordinator_pb2.OffsetCommitRequest(group_id="g")
    call = asyncio.create_task(peers.call(node, "OffsetCommit", request, 20))
    try:
        await asyncio.wait_for(servicer.received.wait(), 10)
        yield peers, call
    finally:
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        await peers.close()
        await server.stop(0)


@pytest.mark.timeout(30)
async def test_pruning_a_coordinator_fails_its_in_flight_calls_as_retriable(
    leaving_coordinator,
) -> None:
    peers, call = leaving_coordinator
    await peers.channels.prune([])  # the instance unregistered: it left the image
    with pytest.raises(RiverlogError) as info:
        await asyncio.wait_for(call, 5)
    assert info.value.code is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert info.value.retriable


@pytest.mark.timeout(30)
async def test_a_cancelled_caller_of_a_coordinator_is_still_cancelled(leaving_coordinator) -> None:
    _, call = leaving_coordinator
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
