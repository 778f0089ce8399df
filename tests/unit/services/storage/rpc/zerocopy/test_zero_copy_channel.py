"""The zero-copy channel answers like the gRPC Fetch, byte for byte: same records, offsets and
errors, through the sync and the asyncio clients, over sendfile and over the pread fallback;
bad frames close the connection without hurting the server."""

import asyncio
import socket
import struct
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
from storage_replica_testkit import NODE, OTHER, Node, image, make_batch, produce_params, topic

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import BatchBuilder
from riverlog.common.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker
from riverlog.common.records.reader import iter_batches_records
from riverlog.common.types import TopicPartition
from riverlog.common.zerocopy import (
    AsyncProduceLane,
    AsyncZeroCopyFetchClient,
    ZeroCopyFetchClient,
    encode_frame,
)
from riverlog.services.storage.log import AppendOrigin
from riverlog.services.storage.replica.fetch import close_results
from riverlog.services.storage.rpc.convert import (
    fetch_params_from_proto,
    fetch_response_to_proto,
)
from riverlog.services.storage.rpc.servicer import StorageServicer
from riverlog.services.storage.rpc.zerocopy import ZeroCopyServer
from riverlog.v1 import common_pb2, data_pb2

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


# --- produce over the channel (the gateway's fast path to leaders, decision 0018) -------------


@pytest.fixture
async def produce_server(node: Node) -> AsyncIterator[ZeroCopyServer]:
    servicer = StorageServicer(NODE, node.produce, node.fetch, node.offsets)
    srv = ZeroCopyServer(
        "127.0.0.1", 0, node.fetch, max_request_bytes=4096, produce=servicer.start_produce
    )
    await srv.start()
    yield srv
    await srv.stop()


def produce_request(*parts: tuple[str, int, bytes], acks: int = common_pb2.ACKS_LEADER):
    return data_pb2.ProduceRequest(
        acks=acks,  # type: ignore[arg-type]
        correlation_id=9,
        partitions=[
            data_pb2.ProducePartition(topic=t, partition=p, records=r) for t, p, r in parts
        ],
    )


async def test_produce_over_the_channel_then_fetch_on_the_same_connection(
    node: Node, produce_server: ZeroCopyServer
) -> None:
    batch = make_batch(4, value_size=5000)  # a frame larger than the fetch-request limit
    async with AsyncZeroCopyFetchClient("127.0.0.1", produce_server.port) as client:
        reply = await client.produce(produce_request(("t", 0, batch), ("t", 1, b"junk")), 5.0)
        assert reply.correlation_id == 9
        assert [(p.error_code, p.base_offset, p.last_offset) for p in reply.partitions] == [
            (ErrorCode.NONE, 0, 3),
            (ErrorCode.CORRUPT_MESSAGE, -1, -1),
        ]
        fetched = await client.fetch(request(parts=[("t", 0, 0)]))
    assert fetched.partitions[0].records[17:] == batch[17:]  # only offset and epoch rewritten
    assert node.replicas.partitions[T1].log_end_offset == 0  # the refused part wrote nothing


async def test_a_produce_frame_without_a_produce_handler_closes_only_that_connection(
    node: Node, server: ZeroCopyServer
) -> None:
    await fill(node)
    client = AsyncZeroCopyFetchClient("127.0.0.1", server.port)
    with pytest.raises(RiverlogError) as refused:
        await client.produce(produce_request(("t", 0, make_batch(1))), 5.0)
    assert refused.value.code == ErrorCode.NETWORK_EXCEPTION
    assert node.replicas.partitions[T0].log_end_offset == 15  # nothing written
    fetched = await client.fetch(request())  # reconnects; the server serves on
    assert fetched.partitions[0].high_watermark == 15
    await client.close()


async def test_an_unknown_request_kind_closes_the_connection(
    node: Node, produce_server: ZeroCopyServer
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", produce_server.port)
    writer.write(struct.pack(">I", 7 << 24 | 3) + b"abc")
    try:
        answer = await asyncio.wait_for(reader.read(16), 5)
    except ConnectionResetError:  # closed with our bytes unread: a reset, not an EOF
        answer = b""
    assert answer == b""  # closed by the server, nothing answered
    writer.close()
    async with AsyncZeroCopyFetchClient("127.0.0.1", produce_server.port) as client:
        assert (await client.fetch(request())).partitions[0].error_code == ErrorCode.NONE


# --- the produce lane: pipelined produce requests on one connection ---------------------------


async def test_a_lane_appends_pipelined_requests_in_the_order_they_were_sent(
    node: Node, produce_server: ZeroCopyServer
) -> None:
    lane = AsyncProduceLane("127.0.0.1", produce_server.port)
    try:
        requests = [produce_request(("t", 0, make_batch(2, tag=i))) for i in range(40)]
        replies = await asyncio.gather(*(lane.produce(r, 5.0) for r in requests))
    finally:
        await lane.close()
    assert [r.correlation_id for r in replies] == [r.correlation_id for r in requests]
    assert len({r.correlation_id for r in requests}) == 40
    assert [p.base_offset for r in replies for p in r.partitions] == list(range(0, 80, 2))
    async with AsyncZeroCopyFetchClient("127.0.0.1", produce_server.port) as client:
        fetched = await client.fetch(request(parts=[("t", 0, 0)], max_bytes=1 << 20))
    keys = [r.key for r in iter_batches_records(fetched.partitions[0].records)]
    assert keys[::2] == [b"k%05d-00000" % i for i in range(40)]  # stored in sending order


async def test_a_lane_delivers_answers_as_they_complete_and_fails_the_waiting_on_close(
    node: Node,
) -> None:
    node.replicas.apply_image(
        image(topic("t", leaders=[NODE, NODE]), topic("r", replicas=[[NODE, OTHER]]), version=2)
    )
    servicer = StorageServicer(NODE, node.produce, node.fetch, node.offsets)
    srv = ZeroCopyServer("127.0.0.1", 0, node.fetch, produce=servicer.start_produce)
    await srv.start()
    lane = AsyncProduceLane("127.0.0.1", srv.port)
    try:
        # acks=all on "r" waits for OTHER, which never fetches; the acks=1 request sent after
        # it on the same connection is answered first.
        waiting = asyncio.ensure_future(
            lane.produce(produce_request(("r", 0, make_batch(1)), acks=common_pb2.ACKS_ALL), 30.0)
        )
        quick = await lane.produce(produce_request(("t", 0, make_batch(1))), 5.0)
        assert quick.partitions[0].error_code == ErrorCode.NONE
        assert not waiting.done()
        await srv.stop()  # the connection ends under the waiting request
        with pytest.raises(RiverlogError) as failed:
            await waiting
        assert failed.value.code == ErrorCode.NETWORK_EXCEPTION
    finally:
        await lane.close()
        await srv.stop()


async def test_a_lane_refuses_a_request_over_its_frame_before_sending_it(
    node: Node, produce_server: ZeroCopyServer
) -> None:
    """The gateway then sends that request by gRPC; the lane serves on."""
    lane = AsyncProduceLane("127.0.0.1", produce_server.port)
    try:
        huge = produce_request(("t", 0, b"x" * (17 << 20)))
        with pytest.raises(RiverlogError) as refused:
            await lane.produce(huge, 5.0)
        assert refused.value.code == ErrorCode.MESSAGE_TOO_LARGE
        reply = await lane.produce(produce_request(("t", 0, make_batch(1))), 5.0)
    finally:
        await lane.close()
    assert reply.partitions[0].error_code == ErrorCode.NONE
    assert node.replicas.partitions[T0].log_end_offset == 1  # the refused one wrote nothing


async def test_read_committed_over_the_channel_carries_the_aborted_transactions(
    node: Node, server: ZeroCopyServer
) -> None:
    builder = BatchBuilder(producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
    builder.append(1_700_000_000_000, b"k", b"aborted")
    abort = build_end_txn_marker(EndTxnMarker(ControlRecordType.ABORT, 0), 9, 1, 1)
    for payload, origin in (
        (builder.build(), AppendOrigin.CLIENT),
        (abort, AppendOrigin.COORDINATOR),
    ):
        params = replace(produce_params((T0, payload)), origin=origin)
        [result] = await node.produce.produce(params)
        assert result.error == ErrorCode.NONE
    req = request(parts=[("t", 0, 0)], isolation_level=common_pb2.READ_COMMITTED)
    async with AsyncZeroCopyFetchClient("127.0.0.1", server.port) as client:
        answer = await client.fetch(req)
    assert answer == await grpc_answer(node, req)
    [part] = answer.partitions
    assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(9, 0)]
    assert part.last_stable_offset == 2 and part.records
