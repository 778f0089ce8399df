"""The zero-copy channel answers like the gRPC Fetch, byte for byte: same records, offsets and
errors, through the sync and the asyncio clients, over sendfile and over the pread fallback;
bad frames close the connection without hurting the server."""

import asyncio
import socket
import struct

import pytest
from storage_replica_testkit import Node, make_batch, produce_params

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.common.zerocopy import AsyncZeroCopyFetchClient, ZeroCopyFetchClient, encode_frame
from riverlog.services.storage.replica.fetch import close_results
from riverlog.services.storage.rpc.converters import (
    fetch_params_from_proto,
    fetch_response_to_proto,
)
from riverlog.services.storage.rpc.zerocopy import ZeroCopyServer
from riverlog.v1 import data_pb2

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


async def fill(node: Node) -> None:
    for i in range(5):
        results = await node.produce.produce(
            produce_params((T0, make_batch(3, tag=i, value_size=300)), (T1, make_batch(1, tag=i)))
        )
        assert all(r.error == ErrorCode.NONE for r in results)


def request(**kwargs) -> data_pb2.FetchRequest:
    parts = kwargs.pop("parts", [("t", 0, 0), ("t", 1, 0)])
    return data_pb2.FetchRequest(
        partitions=[
            data_pb2.FetchPartition(topic=t, partition=p, fetch_offset=o) for t, p, o in parts
        ],
        correlation_id=42,
        **kwargs,
    )


async def grpc_answer(node: Node, req: data_pb2.FetchRequest) -> data_pb2.FetchResponse:
    results = await node.fetch.fetch(fetch_params_from_proto(req))
    try:
        return fetch_response_to_proto(results, req.correlation_id)
    finally:
        close_results(results)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"max_bytes": 2000},
        {"parts": [("t", 0, 4), ("x", 0, 0), ("nope", 0, 0), ("t", 1, 99)]},
    ],
)
async def test_async_client_matches_grpc(node: Node, server: ZeroCopyServer, kwargs) -> None:
    await fill(node)
    req = request(**kwargs)
    async with AsyncZeroCopyFetchClient("127.0.0.1", server.port) as client:
        first = await client.fetch(req)
        again = await client.fetch(req)  # the connection is reused
    expected = await grpc_answer(node, req)
    assert first == expected and again == expected
    assert any(p.records for p in expected.partitions) or kwargs.get("parts")


async def test_sync_client_matches_grpc(node: Node, server: ZeroCopyServer) -> None:
    await fill(node)
    req = request()

    def fetch_twice() -> list[data_pb2.FetchResponse]:
        with ZeroCopyFetchClient("127.0.0.1", server.port) as client:
            return [client.fetch(req), client.fetch(request(max_bytes=1))]

    full, small = await asyncio.to_thread(fetch_twice)
    assert full == await grpc_answer(node, req)
    assert small == await grpc_answer(node, request(max_bytes=1))
    assert full.partitions[0].records and full.partitions[0].zero_copy_records_size == 0


async def test_pread_fallback_sends_the_same_bytes(node: Node, server: ZeroCopyServer) -> None:
    await fill(node)
    server._sendfile_ok = False
    async with AsyncZeroCopyFetchClient("127.0.0.1", server.port) as client:
        assert await client.fetch(request()) == await grpc_answer(node, request())


async def test_long_poll_over_the_channel(node: Node, server: ZeroCopyServer) -> None:
    async with AsyncZeroCopyFetchClient("127.0.0.1", server.port) as client:
        waiting = asyncio.create_task(
            client.fetch(request(parts=[("t", 0, 0)], min_bytes=1, max_wait_ms=30_000))
        )
        for _ in range(50):
            if len(node.purgatory):
                break
            await asyncio.sleep(0.01)
        assert not waiting.done()
        await fill(node)
        response = await asyncio.wait_for(waiting, 10)
    assert response.partitions[0].records
    assert response.partitions[0].high_watermark == 15


async def test_whole_request_error_on_every_partition(node: Node, server: ZeroCopyServer) -> None:
    async with AsyncZeroCopyFetchClient("127.0.0.1", server.port) as client:
        response = await client.fetch(request(max_bytes=-1))
    assert [p.error_code for p in response.partitions] == [ErrorCode.INVALID_REQUEST] * 2
    assert response.partitions[0].error_message


def raw_exchange(port: int, payload: bytes) -> bytes:
    """Send raw bytes, return whatever comes back before the server closes (or 2 s pass)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)
        sock.settimeout(2)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except TimeoutError:
            chunks.append(b"<open>")
        return b"".join(chunks)


@pytest.mark.parametrize(
    "payload",
    [
        encode_frame(b"\xff\xff\xff\xff garbage that is no protobuf"),
        struct.pack(">I", 1 << 30),  # a frame over zero.copy.max.request.bytes
        struct.pack(">I", 100) + b"short",  # a frame cut off by the client closing
    ],
    ids=["garbage", "oversize", "torn"],
)
async def test_bad_frames_close_the_connection(
    node: Node, server: ZeroCopyServer, payload: bytes
) -> None:
    await fill(node)
    if payload.endswith(b"short"):
        answer = await asyncio.to_thread(_send_and_close, server.port, payload)
    else:
        answer = await asyncio.to_thread(raw_exchange, server.port, payload)
    assert answer in (b"", None)
    # The server still serves others.
    async with AsyncZeroCopyFetchClient("127.0.0.1", server.port) as client:
        response = await client.fetch(request())
    assert response.partitions[0].records


def _send_and_close(port: int, payload: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)


def test_client_reports_a_closed_port() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = ZeroCopyFetchClient("127.0.0.1", port, timeout_s=2)
    with pytest.raises(RiverlogError) as exc:
        client.fetch(request())
    assert exc.value.code == ErrorCode.NETWORK_EXCEPTION
