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

import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.channel import CLIENT_ID_KEY, sync_channel
from riverlog.common.rpc.status import from_rpc_error
from riverlog.v1 import gateway_pb2_grpc

from ._credentials import Credentials
from ._throttle import ThrottleTracker
from .errors import ClientClosedError

# Failures that say "this gateway, not this request": try the next address.
_FAILOVER_CODES: Final = frozenset({grpc.StatusCode.UNAVAILABLE})


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
            return stub, index

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
        for channel in channels:
            channel.close()


def rpc_error(error: BaseException) -> RiverlogError:
    """Any failure of a call as a RiverlogError (grpc errors rebuilt by their code)."""
    if isinstance(error, RiverlogError):
        return error
    if isinstance(error, grpc.RpcError):
        return from_rpc_error(error)
    return RiverlogError(f"{type(error).__name__}: {error}", ErrorCode.UNKNOWN_SERVER_ERROR)
