"""The Gateway servicer over a real loopback gRPC server (with the shared error interceptor),
the families wired to in-test fakes: client id from `riverlog-client-id` reaches the calls to
storage, whole-request errors leave as INVALID_ARGUMENT with the code trailer, and streams
answer every correlation id."""

import grpc
import pytest
from gateway_fakes import FAST, Harness, make_image

from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder
from riverlog.common.rpc.channel import CLIENT_ID_KEY, aio_channel
from riverlog.common.rpc.server import RpcServer
from riverlog.common.rpc.status import from_rpc_error
from riverlog.services.gateway.admin import Admin
from riverlog.services.gateway.context import current_request
from riverlog.services.gateway.records import PlainRecords
from riverlog.services.gateway.rpc.servicer import (
    SERVICE_NAME,
    Families,
    GatewayServicer,
    add_to_server,
)
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2, gateway_pb2_grpc


class _NoMetadata:
    async def call(self, method, request, deadline):
        raise AssertionError("no admin call expected")


@pytest.fixture
async def wired():
    h = Harness(make_image(1, {"t": [1, 2]}), FAST)
    seen: list[str] = []
    original = h.storage.produce

    async def produce(node, options, parts, deadline):
        ctx = current_request.get()
        seen.append(ctx.client_id if ctx else "?")
        return await original(node, options, parts, deadline)

    h.storage.produce = produce
    families = Families(
        config=FAST,
        producer=h.producer,
        fetcher=h.fetcher,
        offsets=h.offsets,
        records=PlainRecords(h.cache, h.producer, h.fetcher),
        admin=Admin(h.cache, FAST),
        metadata=_NoMetadata(),
    )
    server = RpcServer("127.0.0.1", 0, [(add_to_server, GatewayServicer(families), SERVICE_NAME)])
    await server.start()
    channel = aio_channel(server.address)
    try:
        yield gateway_pb2_grpc.GatewayStub(channel), seen
    finally:
        await channel.close()
        await server.stop(0)


def _batch() -> bytes:
    builder = BatchBuilder()
    builder.append(1, None, b"v")
    return builder.build()


def _produce(acks: int = 0, correlation_id: int = 0) -> data_pb2.ProduceRequest:
    return data_pb2.ProduceRequest(
        acks=acks,
        correlation_id=correlation_id,
        partitions=[
            data_pb2.ProducePartition(topic="t", partition=1, records=_batch()),
            data_pb2.ProducePartition(topic="t", partition=0, records=_batch()),
        ],
    )


async def test_produce_carries_the_client_id(wired) -> None:
    stub, seen = wired
    response = await stub.Produce(
        _produce(correlation_id=9), metadata=((CLIENT_ID_KEY, "app-42"),), timeout=5
    )
    assert [(p.partition, p.error_code, p.base_offset) for p in response.partitions] == [
        (1, 0, 200),
        (0, 0, 100),
    ]
    assert response.correlation_id == 9
    assert sorted(seen) == ["app-42", "app-42"]
    await stub.Produce(_produce(), timeout=5)
    assert seen[-1] == "-"


async def test_whole_request_errors_are_invalid_argument_with_the_code(wired) -> None:
    stub, seen = wired
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Produce(_produce(acks=5), timeout=5)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "acks" in info.value.details()
    assert from_rpc_error(info.value).code == ErrorCode.INVALID_REQUIRED_ACKS
    with pytest.raises(grpc.aio.AioRpcError) as fetch_info:
        await stub.Fetch(data_pb2.FetchRequest(max_bytes=0), timeout=5)
    assert from_rpc_error(fetch_info.value).code == ErrorCode.INVALID_FETCH_SIZE
    assert seen == []


async def test_produce_stream_answers_every_request(wired) -> None:
    stub, _ = wired

    async def requests():
        for i in range(30):
            yield _produce(acks=9 if i == 7 else 0, correlation_id=i)

    responses = [r async for r in stub.ProduceStream(requests(), timeout=10)]
    assert sorted(r.correlation_id for r in responses) == list(range(30))
    bad = next(r for r in responses if r.correlation_id == 7)
    assert {p.error_code for p in bad.partitions} == {ErrorCode.INVALID_REQUIRED_ACKS}


async def test_plain_records_and_metadata(wired) -> None:
    stub, _ = wired
    response = await stub.ProduceRecords(
        gateway_pb2.ProduceRecordsRequest(
            topic="t",
            partition=0,
            records=[common_pb2.Record(key=b"k", value=b"v"), common_pb2.Record(has_value=True)],
        ),
        timeout=5,
    )
    assert [(r.partition, r.offset) for r in response.results] == [(0, 100), (0, 101)]
    meta = await stub.GetMetadata(gateway_pb2.GetMetadataRequest(topics=["t", "x"]), timeout=5)
    assert [t.name for t in meta.topics] == ["t"]
    assert [e.name for e in meta.errors] == ["x"]


async def test_acks_zero_on_a_stream_gets_no_answer(wired) -> None:
    stub, _ = wired

    async def requests():
        for i in range(6):
            yield _produce(acks=1 if i % 2 else 0, correlation_id=i)

    responses = [r async for r in stub.ProduceStream(requests(), timeout=10)]
    assert sorted(r.correlation_id for r in responses) == [0, 2, 4]
