"""Fixtures for the servicer tests: a storage node's domain objects (from the replica testkit)
with one topic, served by the real StorageServicer on a loopback RpcServer."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "replica"))

from storage_replica_testkit import NODE, OTHER, Node, image, make_node, topic

from riverlog.common.rpc.channel import aio_channel
from riverlog.common.rpc.server import RpcServer
from riverlog.services.storage.rpc.servicer import SERVICE_NAME, StorageServicer
from riverlog.v1 import storage_pb2_grpc


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    made = make_node(tmp_path / "logs")
    made.replicas.apply_image(image(topic("t", leaders=[NODE, NODE]), topic("x", leaders=[OTHER])))
    yield made
    made.close()


@pytest.fixture
async def stub(node: Node) -> AsyncIterator[storage_pb2_grpc.StorageServiceStub]:
    servicer = StorageServicer(NODE, node.produce, node.fetch, node.offsets)
    server = RpcServer(
        "127.0.0.1",
        0,
        [(storage_pb2_grpc.add_StorageServiceServicer_to_server, servicer, SERVICE_NAME)],
    )
    await server.start()
    async with aio_channel(server.address) as channel:
        yield storage_pb2_grpc.StorageServiceStub(channel)
    await server.stop(0)
