"""Regressions (found by the fuzzer, tests/integration/fuzz) of how the shared interceptor
answers client errors.

Request bytes that do not parse as the method's message: gRPC's own deserializer used to raise
inside the server, which logged a traceback per message and answered UNKNOWN with the parser's
text (unary) or, mid-stream, reached the interceptor as an unexpected error (INTERNAL). Now the
call fails with INVALID_ARGUMENT and the code trailer INVALID_REQUEST, nothing is logged as a
bug, and a stream's good messages before the bad one are still answered.

An error message quoting a huge client-sent string (a 1 MiB transactional id) made the status
details, percent-encoded in a header, exceed the client's metadata limit: the client saw
RESOURCE_EXHAUSTED. Now the details are cut and the client sees the error's own status."""

import logging
from collections.abc import AsyncIterator

import grpc
import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.channel import aio_channel
from riverlog.common.rpc.server import RpcServer
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import data_pb2, storage_pb2_grpc

NAME = "riverlog.v1.StorageService"
GARBAGE = b"\xff\xff\xff"


class _Servicer(storage_pb2_grpc.StorageServiceServicer):
    async def Produce(self, request, context):
        if request.transactional_id:
            raise RiverlogError(
                f"transactional id {request.transactional_id!r} is not supported",
                ErrorCode.INVALID_REQUEST,
            )
        return data_pb2.ProduceResponse(correlation_id=request.correlation_id)

    async def ProduceStream(self, request_iterator, context) -> AsyncIterator:
        async for request in request_iterator:
            yield data_pb2.ProduceResponse(correlation_id=request.correlation_id)


@pytest.fixture
async def address():
    srv = RpcServer(
        "127.0.0.1",
        0,
        [(storage_pb2_grpc.add_StorageServiceServicer_to_server, _Servicer(), NAME)],
    )
    await srv.start()
    yield srv.address
    await srv.stop(0)


def _raw(channel: grpc.aio.Channel, method: str, streaming: bool):
    path = f"/{NAME}/{method}"
    deserialize = data_pb2.ProduceResponse.FromString
    if streaming:
        return channel.stream_stream(path, response_deserializer=deserialize)
    return channel.unary_unary(path, response_deserializer=deserialize)


@pytest.mark.timeout(30)
async def test_undecodable_requests_are_invalid_argument(
    address: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    good = data_pb2.ProduceRequest(correlation_id=5).SerializeToString()
    async with aio_channel(address) as channel:
        produce = _raw(channel, "Produce", streaming=False)
        assert (await produce(good, timeout=10)).correlation_id == 5
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await produce(GARBAGE, timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "undecodable request" in (info.value.details() or "")
        assert from_rpc_error(info.value).code is ErrorCode.INVALID_REQUEST

        stream = _raw(channel, "ProduceStream", streaming=True)(iter([good, GARBAGE, good]))
        answered = []
        with pytest.raises(grpc.aio.AioRpcError) as info:
            async for response in stream:
                answered.append(response.correlation_id)
        assert answered == [5]
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "Traceback" not in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.timeout(30)
async def test_huge_error_messages_are_cut_not_resource_exhausted(address: str) -> None:
    huge = data_pb2.ProduceRequest(transactional_id="日" * (1 << 20))
    async with aio_channel(address) as channel:
        produce = _raw(channel, "Produce", streaming=False)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await produce(huge.SerializeToString(), timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = info.value.details() or ""
    assert details.startswith("transactional id '日日日") and details.endswith("more bytes)")
    assert len(details.encode()) < 1200
    assert from_rpc_error(info.value).code is ErrorCode.INVALID_REQUEST
