"""MetadataClient failover and MembershipSession behaviour against an in-process fake
MetadataService (real gRPC on loopback, no etcd): transport failures and NOT_CONTROLLER move to
the next instance, other errors surface at once, a lapsed lease is re-registered and a newer
incarnation fences the session."""

from __future__ import annotations

import asyncio
import socket

import pytest

from riverlog.common.cluster import MembershipSession, MetadataClient, NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.server import RpcServer
from riverlog.v1 import admin_pb2, metadata_pb2, metadata_pb2_grpc


class FakeMetadata(metadata_pb2_grpc.MetadataServiceServicer):
    def __init__(self, describe_error: ErrorCode | None = None) -> None:
        self.describe_error = describe_error
        self.registrations: list[metadata_pb2.RegisterNodeRequest] = []
        self.heartbeats = 0
        self.lapse_next_heartbeat = False
        self.refuse_registrations = False

    async def DescribeCluster(self, request, context):
        if self.describe_error is not None:
            raise RiverlogError("fake failure", self.describe_error)
        return admin_pb2.DescribeClusterResponse(cluster_id="fake")

    async def RegisterNode(self, request, context):
        if self.refuse_registrations:
            return metadata_pb2.RegisterNodeResponse(error_code=ErrorCode.NODE_ID_IN_USE)
        self.registrations.append(request)
        return metadata_pb2.RegisterNodeResponse(
            lease_id=len(self.registrations), lease_ttl_ms=300, heartbeat_interval_ms=50
        )

    async def Heartbeat(self, request, context):
        self.heartbeats += 1
        if self.lapse_next_heartbeat:
            self.lapse_next_heartbeat = False
            return metadata_pb2.HeartbeatResponse(error_code=ErrorCode.UNKNOWN_NODE)
        return metadata_pb2.HeartbeatResponse(lease_ttl_ms=300)

    async def UnregisterNode(self, request, context):
        return metadata_pb2.UnregisterNodeResponse()


def dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def serve(fake: FakeMetadata) -> RpcServer:
    server = RpcServer(
        "127.0.0.1",
        0,
        [
            (
                metadata_pb2_grpc.add_MetadataServiceServicer_to_server,
                fake,
                "riverlog.v1.MetadataService",
            )
        ],
    )
    await server.start()
    return server


async def until(predicate, timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.01)


def test_failover_to_the_next_instance():
    async def scenario() -> None:
        not_controller = await serve(FakeMetadata(ErrorCode.NOT_CONTROLLER))
        good = await serve(FakeMetadata())
        client = MetadataClient([dead_address(), not_controller.address, good.address], 2.0)
        try:
            assert (await client.describe_cluster()).cluster_id == "fake"
            assert client.current_address == good.address
            assert (await client.describe_cluster()).cluster_id == "fake"  # sticks to it
        finally:
            await client.close()
            await not_controller.stop(0)
            await good.stop(0)

    asyncio.run(scenario())


def test_non_retriable_errors_surface_at_once():
    async def scenario() -> None:
        bad = await serve(FakeMetadata(ErrorCode.INVALID_REQUEST))
        good = await serve(FakeMetadata())
        client = MetadataClient([bad.address, good.address], 2.0)
        try:
            with pytest.raises(RiverlogError) as err:
                await client.describe_cluster()
            assert err.value.code == ErrorCode.INVALID_REQUEST
            assert client.current_address == bad.address
        finally:
            await client.close()
            await bad.stop(0)
            await good.stop(0)

    asyncio.run(scenario())


def test_all_instances_down_is_a_network_error():
    async def scenario() -> None:
        client = MetadataClient([dead_address(), dead_address()], 1.0)
        try:
            with pytest.raises(RiverlogError) as err:
                await client.describe_cluster()
            assert err.value.code == ErrorCode.NETWORK_EXCEPTION
            assert err.value.retriable
        finally:
            await client.close()

    asyncio.run(scenario())


def test_membership_heartbeats_and_reregisters_after_a_lapse():
    async def scenario() -> None:
        fake = FakeMetadata()
        server = await serve(fake)
        client = MetadataClient([server.address], 2.0)
        node = NodeInfo("storage", 4, "127.0.0.1", 9004, incarnation=7)
        seen = []
        session = MembershipSession(client, node, on_registered=seen.append)
        try:
            granted = await session.start()
            assert granted.lease_id == 1 and granted.heartbeat_interval_ms == 50
            await until(lambda: fake.heartbeats >= 3)
            fake.lapse_next_heartbeat = True
            await until(lambda: len(fake.registrations) == 2)
            assert session.lease_id == 2 and [r.lease_id for r in seen] == [1, 2]
            assert fake.registrations[1].node.incarnation == 7
            fake.refuse_registrations = True
            fake.lapse_next_heartbeat = True
            await until(lambda: session.fenced)
        finally:
            await session.stop()
            await client.close()
            await server.stop(0)

    asyncio.run(scenario())


def test_membership_start_retries_until_the_service_answers():
    async def scenario() -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        client = MetadataClient([f"127.0.0.1:{port}"], 1.0)
        session = MembershipSession(client, NodeInfo("gateway", 1, "127.0.0.1", 9100))
        starting = asyncio.create_task(session.start())
        await asyncio.sleep(0.3)
        assert not starting.done()
        fake = FakeMetadata()
        server = RpcServer(
            "127.0.0.1",
            port,
            [
                (
                    metadata_pb2_grpc.add_MetadataServiceServicer_to_server,
                    fake,
                    "riverlog.v1.MetadataService",
                )
            ],
        )
        await server.start()
        try:
            registration = await asyncio.wait_for(starting, 20)
            assert registration.lease_id == 1
        finally:
            await session.stop()
            await client.close()
            await server.stop(0)

    asyncio.run(scenario())


def test_client_follows_the_live_metadata_instances_keeping_the_current_one() -> None:
    client = MetadataClient(["a:1", "b:2"])
    client.advance()
    client.use_addresses(["b:2", "c:3"])  # b stays current: no needless reconnect
    assert client.addresses == ["b:2", "c:3"] and client.current_address == "b:2"
    client.use_addresses(["c:3"])  # b removed: the first listed
    assert client.current_address == "c:3"
    client.use_addresses([])  # nothing known: keep what there is
    assert client.addresses == ["c:3"]
