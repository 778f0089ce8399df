"""The shared server bootstrap over a real loopback server: health, reflection, and the error
interceptor's mapping of domain errors (with the code trailer) and of bugs (sanitized)."""

from collections.abc import AsyncIterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.channel import aio_channel
from riverlog.common.rpc.server import RpcServer
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import admin_pb2, metadata_pb2, metadata_pb2_grpc


class _Servicer(metadata_pb2_grpc.MetadataServiceServicer):
    async def DescribeCluster(self, request, context):
        return admin_pb2.DescribeClusterResponse(cluster_id="c1", controller_id=7)

    async def ListTopics(self, request, context):
        raise RiverlogError("topic 'x' is not here", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)

    async def DescribeTopics(self, request, context):
        raise KeyError("secret internal detail")

    async def Watch(self, request, context) -> AsyncIterator[metadata_pb2.MetadataUpdate]:
        yield metadata_pb2.MetadataUpdate(version=1)
        raise RiverlogError(None, ErrorCode.NOT_CONTROLLER)


NAME = "riverlog.v1.MetadataService"


@pytest.fixture
async def server():
    srv = RpcServer(
        "127.0.0.1",
        0,
        [(metadata_pb2_grpc.add_MetadataServiceServicer_to_server, _Servicer(), NAME)],
    )
    await srv.start()
    yield srv
    await srv.stop(0)


@pytest.mark.timeout(30)
async def test_health_reflection_and_error_mapping(server: RpcServer) -> None:
    async with aio_channel(server.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        reply = await health.Check(health_pb2.HealthCheckRequest(service=NAME))
        assert reply.status == health_pb2.HealthCheckResponse.SERVING

        refl = reflection_pb2_grpc.ServerReflectionStub(channel)
        responses = refl.ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")])
        )
        names = set()
        async for r in responses:
            names = {s.name for s in r.list_services_response.service}
        assert NAME in names and "grpc.health.v1.Health" in names

        stub = metadata_pb2_grpc.MetadataServiceStub(channel)
        ok = await stub.DescribeCluster(admin_pb2.DescribeClusterRequest())
        assert ok.controller_id == 7

        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.ListTopics(admin_pb2.ListTopicsRequest())
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        err = from_rpc_error(info.value)
        assert err.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert "'x' is not here" in err.message

        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.DescribeTopics(admin_pb2.DescribeTopicsRequest())
        assert info.value.code() == grpc.StatusCode.INTERNAL
        assert "secret" not in (info.value.details() or "")

        stream = stub.Watch(metadata_pb2.WatchRequest())
        got = []
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for update in stream:
                got.append(update.version)
        assert got == [1]
        assert from_rpc_error(info.value).code is ErrorCode.NOT_CONTROLLER
