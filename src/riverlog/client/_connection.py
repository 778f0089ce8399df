"""The SDK's one way to reach the cluster: a gRPC channel per gateway address, with failover.

`bootstrap.servers` lists gateways, and any gateway serves every request (it routes to partition
leaders itself), so a client talks to one address at a time and moves to the next when a call
fails as UNAVAILABLE (the gateway is down or unreachable). Channels are created on first use
and kept, so coming back to an address reuses its connection. Every call carries the client id
in the `riverlog-client-id` metadata key (and, with sasl.username set, the user and password in
`riverlog-user` / `riverlog-password`, or with sasl.oauthbearer.token `authorization: Bearer`;
channels are TLS with security.protocol=SSL, see `_credentials`), and every failure comes out
as a RiverlogError (`from_rpc_error`), so callers never see grpc.RpcError.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, InvalidStateError
from typing import Any, Final, Literal

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.malloc import CLIENT, tune_malloc
from riverlog.common.rpc.channel import CLIENT_ID_KEY, sync_channel
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import data_pb2, gateway_pb2_grpc

from ._credentials import Credentials
from ._direct_stream import open_direct
from ._fetch_answer import parse_fetch_response
from ._produce_request import EncodedProduceRequest, serialize_request
from ._stream import StreamCall
from ._throttle import ThrottleTracker
from .errors import ClientClosedError

# Failures that say "this gateway, not this request": try the next address.
_FAILOVER_CODES: Final = frozenset({grpc.StatusCode.UNAVAILABLE})
_Method = Literal["Produce", "Fetch"]
_WARM_RETRY_S: Final = 5.0  # how often to reopen a channel's idle call once it ended
_PRODUCE_STREAM: Final = "/riverlog.v1.Gateway/ProduceStream"
_FETCH_STREAM: Final = "/riverlog.v1.Gateway/FetchStream"


def open_channel(target: str, credentials: grpc.ChannelCredentials | None = None) -> grpc.Channel:
    """A channel with the shared options (TLS with `credentials`), traced when tracing is
    configured."""
    return sync_channel(target, credentials)


class GatewayConnection:
    """Channels to the gateways of bootstrap.servers; one current address at a time.

    Thread-safe: any thread may call `call`, `stub`, `failover` and `close`. `stub()` returns
    the current address's stub and that address's index, for calls a caller issues itself
    (the producer's `Produce.future`); it then reports an UNAVAILABLE outcome with
    `failover(index)`, which moves on only if that address is still the current one.
    """

    def __init__(
        self,
        servers: Sequence[str],
        client_id: str,
        credentials: Credentials | tuple[str, str] | None = None,
    ) -> None:
        if not servers:
            raise ValueError("bootstrap.servers lists no gateway")
        tune_malloc(CLIENT)  # fresh pages for every large message cost more than a copy (0044)
        self._servers = tuple(servers)
        self._client_id = client_id
        if isinstance(credentials, tuple):
            credentials = Credentials(*credentials)
        credentials = credentials or Credentials()
        self._channel_credentials = credentials.channel_credentials()
        metadata = [(CLIENT_ID_KEY, client_id), *credentials.metadata()]
        self.metadata: Final[tuple[tuple[str, str], ...]] = tuple(metadata)
        self.throttle = ThrottleTracker()
        self._lock = threading.Lock()
        self._channels: dict[int, grpc.Channel] = {}
        self._stubs: dict[int, gateway_pb2_grpc.GatewayStub] = {}
        self._current = 0
        self._closed = False
        self._warm_calls: dict[int, Any] = {}
        self._streams: dict[tuple[int, str], StreamCall] = {}
        self._unary_only: set[int] = set()  # gateways that answered a stream UNIMPLEMENTED
        self._warm_retry_at: dict[int, float] = {}
        self._warm_stop = threading.Event()

    @property
    def servers(self) -> tuple[str, ...]:
        return self._servers

    @property
    def client_id(self) -> str:
        return self._client_id

    @property
    def current_server(self) -> str:
        return self._servers[self._current]

    def stub(self) -> tuple[gateway_pb2_grpc.GatewayStub, int]:
        """The current gateway's stub and its address index."""
        with self._lock:
            if self._closed:
                raise ClientClosedError()
            index = self._current
            stub = self._stubs.get(index)
            if stub is None:
                channel = open_channel(self._servers[index], self._channel_credentials)
                self._channels[index] = channel
                stub = self._stubs[index] = gateway_pb2_grpc.GatewayStub(channel)
            self._keep_warm(index, stub)
            return stub, index

    def _keep_warm(self, index: int, stub: gateway_pb2_grpc.GatewayStub) -> None:
        """Keep one idle call (a ProduceStream that sends nothing) open on the channel. grpcio
        runs a channel's completion thread only while a call is open and starts a new thread
        for the next call after the last one ended: without this, a producer or consumer whose
        requests go one at a time pays a thread start per request (decision 0015). Reopened
        at most every few seconds. Called under the lock."""
        call = self._warm_calls.get(index)
        if call is not None and not call.done():
            return
        now = time.monotonic()
        if now < self._warm_retry_at.get(index, 0.0):
            return
        self._warm_retry_at[index] = now + _WARM_RETRY_S
        try:
            self._warm_calls[index] = stub.ProduceStream(
                _idle_requests(self._warm_stop), metadata=self.metadata
            )
        except Exception:  # only an optimisation
            self._warm_calls.pop(index, None)

    def submit(
        self,
        method: _Method,
        request: Any,
        timeout_s: float,
        on_push: Callable[[int, Any], None] | None = None,
    ) -> tuple[Future[Any], int]:
        """Send a Produce or Fetch request on the current gateway's ProduceStream or
        FetchStream (`_stream`), or as a unary call where the gateway has no streams; the
        future and the gateway's address index. The request must want an answer (not
        acks=0). `on_push(index, answer)` gets the stream's answers sent unasked (fetch push
        credit), then None when the stream ends; a unary call has none."""
        stub, index = self.stub()
        with self._lock:
            stream = None if index in self._unary_only else self._streams.get((index, method))
            if stream is None and index not in self._unary_only:
                stream = self._streams[(index, method)] = self._open_stream(stub, index, method)
        if stream is None:
            return self._unary(stub, method, request, timeout_s), index
        if on_push is not None:
            stream.on_push = functools.partial(on_push, index)
        answer: Future[Any] = Future()

        def done(sent: Future[Any]) -> None:
            error = sent.exception()
            if isinstance(error, grpc.RpcError) and _unimplemented(error):
                with self._lock:
                    self._unary_only.add(index)
                _chain(self._unary(stub, method, request, timeout_s), answer)
            else:
                _chain(sent, answer)

        stream.submit(request, timeout_s).add_done_callback(done)
        return answer, index

    def _open_stream(
        self, stub: gateway_pb2_grpc.GatewayStub, index: int, method: _Method
    ) -> StreamCall:
        """Called under the lock. A ProduceStream's requests may be encoded by hand
        (`_produce_request.EncodedProduceRequest`), so its serializer takes either form; a
        FetchStream's answers are `FetchAnswer`s, their records left where they arrived."""
        open_call: Any
        serializer: Callable[[Any], bytes]
        deserializer: Callable[[bytes], Any]
        channel = self._channels[index]
        if method == "Produce":
            path, serializer, deserializer = (
                _PRODUCE_STREAM,
                serialize_request,
                data_pb2.ProduceResponse.FromString,
            )
            open_call = channel.stream_stream(
                path, request_serializer=serializer, response_deserializer=deserializer
            )
        else:
            path, serializer, deserializer = (
                _FETCH_STREAM,
                data_pb2.FetchRequest.SerializeToString,
                parse_fetch_response,
            )
            open_call = channel.stream_stream(
                path, request_serializer=serializer, response_deserializer=deserializer
            )
        metadata = self.metadata
        return StreamCall(
            lambda requests: open_call(requests, metadata=metadata),
            f"{method}Stream",
            lambda on_message, on_end: open_direct(
                channel, path, metadata, serializer, deserializer, on_message, on_end
            ),
        )

    def _unary(
        self, stub: gateway_pb2_grpc.GatewayStub, method: _Method, request: Any, timeout_s: float
    ) -> Future[Any]:
        call: Any = stub.Produce if method == "Produce" else stub.Fetch
        if isinstance(request, EncodedProduceRequest):
            request = request.message()
        future: Future[Any] = call.future(request, timeout=timeout_s, metadata=self.metadata)
        return future

    def expire(self) -> None:
        """End the streams on which a request waited past its timeout (`StreamCall.expire`)."""
        with self._lock:
            streams = list(self._streams.values())
        now = time.monotonic()
        for stream in streams:
            stream.expire(now)

    def throttle_remaining_s(self) -> float:
        """How long the current gateway must be left alone (its last throttle_time_ms)."""
        return self.throttle.remaining_s(self._current)

    def failover(self, index: int) -> None:
        """The address at `index` failed as unavailable: move to the next one, if still on it."""
        with self._lock:
            if self._current == index:
                self._current = (index + 1) % len(self._servers)

    @staticmethod
    def should_failover(error: grpc.RpcError) -> bool:
        code = error.code() if hasattr(error, "code") else None
        return code in _FAILOVER_CODES

    def call(
        self, method: Callable[[gateway_pb2_grpc.GatewayStub], Any], request: Any, timeout_s: float
    ) -> Any:
        """Run the unary call `method(stub)(request)`; on UNAVAILABLE try each other address
        once. Raises the RiverlogError of the last failure."""
        attempts = len(self._servers)
        for attempt in range(attempts):
            stub, index = self.stub()
            try:
                return method(stub)(request, timeout=timeout_s, metadata=self.metadata)
            except grpc.RpcError as e:
                if self.should_failover(e) and attempt + 1 < attempts:
                    self.failover(index)
                    continue
                if self.should_failover(e):
                    self.failover(index)
                raise from_rpc_error(e) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close every channel; later calls raise ClientClosedError. Idempotent."""
        with self._lock:
            self._closed = True
            channels = list(self._channels.values())
            self._channels.clear()
            self._stubs.clear()
            warm = list(self._warm_calls.values())
            self._warm_calls.clear()
            streams = list(self._streams.values())
            self._streams.clear()
        self._warm_stop.set()
        for stream in streams:
            stream.close()
        for call in warm:
            call.cancel()
        for channel in channels:
            channel.close()


def _unimplemented(error: grpc.RpcError) -> bool:
    code = error.code() if hasattr(error, "code") else None
    return bool(code == grpc.StatusCode.UNIMPLEMENTED)


def _chain(source: Future[Any], target: Future[Any]) -> None:
    """`target` gets `source`'s outcome once it has one."""

    def copy(done: Future[Any]) -> None:
        error = done.exception()
        with contextlib.suppress(InvalidStateError):  # the owner cancelled `target`
            if error is not None:
                target.set_exception(error)
            else:
                target.set_result(done.result())

    source.add_done_callback(copy)


def _idle_requests(stop: threading.Event) -> Iterator[data_pb2.ProduceRequest]:
    """A request stream that sends nothing until `stop` is set."""
    stop.wait()
    yield from ()


def rpc_error(error: BaseException) -> RiverlogError:
    """Any failure of a call as a RiverlogError (grpc errors rebuilt by their code)."""
    if isinstance(error, RiverlogError):
        return error
    if isinstance(error, grpc.RpcError):
        return from_rpc_error(error)
    return RiverlogError(f"{type(error).__name__}: {error}", ErrorCode.UNKNOWN_SERVER_ERROR)
