"""`closed_channel_raises`, the one wrapper every peer client puts around its calls: a call
whose ChannelCache channel is closed under it (the node left the cluster: `prune`; it
restarted: its channel replaced, then closed) raises the caller's retriable RiverlogError at
once, while a caller that is itself cancelled stays cancelled and every other outcome (an
answer, an RpcError) passes through unchanged. On a real loopback server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace

import grpc
import pytest

from riverlog.common.cluster import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.channels import ChannelCache, closed_channel_raises
from riverlog.common.rpc.server import RpcServer
from riverlog.v1 import quota_pb2, quota_pb2_grpc


class _Quota(quota_pb2_grpc.QuotaServiceServicer):
    """Holds ReportUsage from gateway "held" (like a node SIGSTOP'd or stopping), answers
    "fast" at once and refuses "bad" with a gRPC status."""

    def __init__(self) -> None:
        self.received = asyncio.Event()

    async def ReportUsage(self, request, context):
        if request.gateway_id == "bad":
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, "no")
        if request.gateway_id == "held":
            self.received.set()
            await asyncio.sleep(3600)
        return quota_pb2.ReportUsageResponse()


@dataclass
class _Setup:
    channels: ChannelCache[quota_pb2_grpc.QuotaServiceAsyncStub]
    node: NodeInfo
    servicer: _Quota

    async def report(self, gateway_id: str) -> quota_pb2.ReportUsageResponse:
        stub = self.channels.stub(self.node)
        request = quota_pb2.ReportUsageRequest(gateway_id=gateway_id)
        with closed_channel_raises(ErrorCode.COORDINATOR_NOT_AVAILABLE, "quota instance 4"):
            response: quota_pb2.ReportUsageResponse = await stub.ReportUsage(request, timeout=20)
        return response

    async def held(self) -> asyncio.Task[quota_pb2.ReportUsageResponse]:
        call = asyncio.create_task(self.report("held"))
        await asyncio.wait_for(self.servicer.received.wait(), 10)
        return call


@pytest.fixture
async def setup() -> AsyncIterator[_Setup]:
    servicer = _Quota()
    add = quota_pb2_grpc.add_QuotaServiceServicer_to_server
    server = RpcServer("127.0.0.1", 0, [(add, servicer, "riverlog.v1.QuotaService")])
    await server.start()
    channels: ChannelCache[quota_pb2_grpc.QuotaServiceAsyncStub] = ChannelCache(
        quota_pb2_grpc.QuotaServiceStub, "quota instance"
    )
    node = NodeInfo(kind="quota", node_id=4, host="127.0.0.1", port=server.port, incarnation=1)
    try:
        yield _Setup(channels, node, servicer)
    finally:
        await channels.close()
        await server.stop(0)


@pytest.mark.timeout(30)
async def test_a_pruned_channel_fails_the_call_with_the_given_retriable_error(setup) -> None:
    call = await setup.held()
    await setup.channels.prune([])  # the node left the cluster image
    with pytest.raises(RiverlogError) as info:
        await asyncio.wait_for(call, 5)
    assert info.value.code is ErrorCode.COORDINATOR_NOT_AVAILABLE
    assert info.value.retriable
    assert "quota instance 4" in str(info.value)


@pytest.mark.timeout(30)
async def test_a_restarted_nodes_replaced_channel_fails_the_call_when_it_closes(setup) -> None:
    call = await setup.held()
    setup.channels.stub(replace(setup.node, incarnation=2))  # a new channel; the old closes later
    await setup.channels.close()  # ends the replaced channel's grace at once
    with pytest.raises(RiverlogError) as info:
        await asyncio.wait_for(call, 5)
    assert info.value.code is ErrorCode.COORDINATOR_NOT_AVAILABLE


@pytest.mark.timeout(30)
async def test_a_cancelled_caller_stays_cancelled(setup) -> None:
    call = await setup.held()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


@pytest.mark.timeout(30)
async def test_answers_and_rpc_errors_pass_through(setup) -> None:
    assert await setup.report("fast") == quota_pb2.ReportUsageResponse()
    with pytest.raises(grpc.RpcError) as info:
        await setup.report("bad")
    assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
