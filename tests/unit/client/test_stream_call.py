"""StreamCall against a real gRPC server (a generic bidi handler on loopback): answers reach the
future of their request whatever their order, a broken stream fails what waits on it and the
next request opens a new stream, and a request past its timeout ends the stream. Every test runs
on both transports: grpcio's public iterator path (a reader thread) and `DirectStream` (the
core operations driven on grpcio's channel thread)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
import pytest

from riverlog.client._direct_stream import DirectStream, open_direct
from riverlog.client._stream import StreamCall
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import data_pb2

pytestmark = pytest.mark.timeout(60)

_METHOD = "/test.Echo/Stream"


class _Echo:
    """Answers each ProduceRequest with a ProduceResponse of the same correlation id: requests
    whose timeout_ms is 0 at once, the others only after the next one arrived (so answers
    come out of order); a request with timeout_ms -1 is never answered; -2 aborts the
    stream."""

    def __init__(self) -> None:
        self.streams = 0
        self.lock = threading.Lock()

    def handle(
        self, requests: Iterator[data_pb2.ProduceRequest], context: grpc.ServicerContext
    ) -> Iterator[data_pb2.ProduceResponse]:
        with self.lock:
            self.streams += 1
        held: list[data_pb2.ProduceRequest] = []
        for request in requests:
            if request.timeout_ms == -2:
                context.abort(grpc.StatusCode.UNAVAILABLE, "gone")
            if request.timeout_ms == -1:
                continue
            if request.timeout_ms == 0:
                yield data_pb2.ProduceResponse(correlation_id=request.correlation_id)
            for h in held:
                yield data_pb2.ProduceResponse(correlation_id=h.correlation_id)
            held = [request] if request.timeout_ms > 0 else []


@pytest.fixture(params=["iterator", "direct"])
def echo(request: pytest.FixtureRequest) -> Iterator[tuple[_Echo, grpc.Channel, bool]]:
    servicer = _Echo()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    handler = grpc.stream_stream_rpc_method_handler(
        servicer.handle,
        request_deserializer=data_pb2.ProduceRequest.FromString,
        response_serializer=data_pb2.ProduceResponse.SerializeToString,
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler("test.Echo", {"Stream": handler})]
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    yield servicer, channel, request.param == "direct"
    channel.close()
    server.stop(grace=None).wait()


def _stream(channel: grpc.Channel, direct: bool, method: str = _METHOD) -> StreamCall:
    serializer = data_pb2.ProduceRequest.SerializeToString
    deserializer = data_pb2.ProduceResponse.FromString
    call = channel.stream_stream(
        method, request_serializer=serializer, response_deserializer=deserializer
    )
    return StreamCall(
        lambda requests: call(requests),
        "test stream",
        (
            lambda on_message, on_end: open_direct(
                channel, method, (), serializer, deserializer, on_message, on_end
            )
        )
        if direct
        else None,
    )


def _check_transport(stream: StreamCall, direct: bool) -> None:
    """The stream runs on the transport the test is for (this grpcio has the internals)."""
    assert isinstance(stream._call, DirectStream) == direct


def test_answers_reach_their_requests_in_any_order(echo) -> None:
    servicer, channel, direct = echo
    stream = _stream(channel, direct)
    try:
        held = stream.submit(data_pb2.ProduceRequest(timeout_ms=5), 30)
        _check_transport(stream, direct)
        quick = stream.submit(data_pb2.ProduceRequest(timeout_ms=0), 30)
        # `quick` is answered before `held`, which is answered after the next request came.
        assert quick.result(10).correlation_id == 2
        assert held.result(10).correlation_id == 1
        # Back to back, big enough that sends queue behind the one in progress.
        big = data_pb2.ProducePartition(records=b"x" * 200_000)
        many = [
            stream.submit(data_pb2.ProduceRequest(timeout_ms=0, partitions=[big]), 30)
            for _ in range(50)
        ]
        assert [f.result(10).correlation_id for f in many] == list(range(3, 53))
    finally:
        stream.close()
    assert servicer.streams == 1  # one stream carried them all


def test_a_broken_stream_fails_what_waits_and_the_next_request_reopens(echo) -> None:
    servicer, channel, direct = echo
    stream = _stream(channel, direct)
    try:
        waiting = stream.submit(data_pb2.ProduceRequest(timeout_ms=-1), 30)
        stream.submit(data_pb2.ProduceRequest(timeout_ms=-2), 30)  # the server aborts
        with pytest.raises(grpc.RpcError) as broken:
            waiting.result(10)
        assert broken.value.code() == grpc.StatusCode.UNAVAILABLE
        again = stream.submit(data_pb2.ProduceRequest(timeout_ms=0), 30)
        assert again.result(10).correlation_id > 0
    finally:
        stream.close()
    assert servicer.streams == 2


def test_a_request_past_its_timeout_ends_the_stream(echo) -> None:
    _, channel, direct = echo
    stream = _stream(channel, direct)
    try:
        lost = stream.submit(data_pb2.ProduceRequest(timeout_ms=-1), 0.0)
        assert stream.expire()
        with pytest.raises(RiverlogError) as timed_out:
            lost.result(10)
        assert timed_out.value.code == ErrorCode.REQUEST_TIMED_OUT
        assert not stream.expire()  # nothing else waits
        # A new stream serves the next request (the server may not even have seen the first
        # one: it was cancelled at once).
        assert stream.submit(data_pb2.ProduceRequest(timeout_ms=0), 30).result(10)
    finally:
        stream.close()


def test_a_stream_the_server_does_not_have_fails_as_unimplemented(echo) -> None:
    _, channel, direct = echo
    stream = _stream(channel, direct, "/test.Echo/Missing")
    try:
        with pytest.raises(grpc.RpcError) as missing:
            stream.submit(data_pb2.ProduceRequest(timeout_ms=0), 30).result(10)
        assert missing.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        stream.close()


def test_close_fails_what_waits_and_refuses_the_next_request(echo) -> None:
    _, channel, direct = echo
    stream = _stream(channel, direct)
    waiting = stream.submit(data_pb2.ProduceRequest(timeout_ms=-1), 30)
    _check_transport(stream, direct)
    stream.close()
    with pytest.raises((grpc.RpcError, RiverlogError)):
        waiting.result(10)
    with pytest.raises(RiverlogError):
        stream.submit(data_pb2.ProduceRequest(timeout_ms=0), 30).result(10)
