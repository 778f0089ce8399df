"""Server bootstrap shared by every service: asyncio gRPC server with health checking,
reflection, tracing and the error interceptor, so no service writes its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from riverlog.common import tracing
from riverlog.common.metrics.rpc import instrument

from . import tls
from .channel import CHANNEL_OPTIONS, KEEPALIVE_TIME_MS
from .interceptor import ErrorInterceptor
from .peer_certificates import PeerCertificates

SERVER_OPTIONS: list[tuple[str, Any]] = [
    *CHANNEL_OPTIONS,
    # Our channels ping idle connections every KEEPALIVE_TIME_MS; a server by default accepts
    # a ping without calls only every 5 minutes and answers more with GOAWAY
    # (too_many_pings), which dropped idle clients' connections (found by the fuzzer's runs).
    ("grpc.http2.min_recv_ping_interval_without_data_ms", KEEPALIVE_TIME_MS // 2),
    ("grpc.http2.max_ping_strikes", 0),
]

AddServicer = Callable[[Any, grpc.aio.Server], None]


class _Internal:
    """The `credentials` of a server of an internal API: the installed internal TLS."""


INTERNAL: Final = _Internal()


class RpcServer:
    """An asyncio gRPC server bound to host:port (port 0 picks a free one).

    Lifecycle: `await start()` binds and serves, marking every service SERVING in the health
    service; `await stop(grace)` marks them NOT_SERVING and drains in-flight calls.
    """

    def __init__(
        self,
        host: str,
        port: int,
        servicers: Sequence[tuple[AddServicer, Any, str]],
        credentials: grpc.ServerCredentials | _Internal | None = INTERNAL,
        interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    ) -> None:
        """`servicers`: (add_XServicer_to_server, servicer, full service name) triples;
        `credentials`: INTERNAL (the default) for a server of an internal API, which serves
        mutual TLS when internal TLS is installed (`tls.install`: a client certificate signed
        by the cluster CA is required, and every call's peer certificate is recorded, see
        `peer_certificates`) and plaintext otherwise; a client-facing listener passes its own
        (grpc.ssl_server_credentials) or None for plaintext;
        `interceptors`: a service's own, run inside the error interceptor (so what they raise
        is mapped to a status like anything a servicer raises)."""
        chain: list[grpc.aio.ServerInterceptor] = []
        traced = tracing.aio_server_interceptor()
        if traced is not None:
            chain.append(traced)
        chain.append(ErrorInterceptor())
        chain.extend(interceptors)
        self.peer_certificates: PeerCertificates | None = None
        if isinstance(credentials, _Internal):
            credentials = tls.server_credentials()
            if credentials is not None:
                self.peer_certificates = PeerCertificates()
                chain.append(self.peer_certificates.interceptor())
        self._server = grpc.aio.server(interceptors=chain, options=SERVER_OPTIONS)
        if self.peer_certificates is not None:
            self._server.add_generic_rpc_handlers((self.peer_certificates.handler(),))
        self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        self._names = [name for _, _, name in servicers]
        for add, servicer, name in servicers:
            add(instrument(servicer, name), self._server)
        reflection.enable_server_reflection(
            [*self._names, health.SERVICE_NAME, reflection.SERVICE_NAME], self._server
        )
        self.host = host
        address = f"{host}:{port}"
        if credentials is None:
            self.port = self._server.add_insecure_port(address)
        else:
            self.port = self._server.add_secure_port(address, credentials)
        if self.port == 0:
            raise OSError(f"cannot bind {host}:{port}")

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> None:
        await self._server.start()
        for name in ["", *self._names]:
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def stop(self, grace: float = 5.0) -> None:
        await self._health.enter_graceful_shutdown()
        await self._server.stop(grace)

    async def wait_for_termination(self) -> None:
        await self._server.wait_for_termination()
