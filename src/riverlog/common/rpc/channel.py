"""Client channels with the options every Riverlog caller needs (message sizes, keepalive,
tracing), for asyncio services and for the synchronous SDK."""

from __future__ import annotations

from typing import Any

import grpc

from riverlog.common import tracing

from . import tls

MAX_MESSAGE_BYTES = 256 * 1024 * 1024
CLIENT_ID_KEY = "riverlog-client-id"

KEEPALIVE_TIME_MS = 20_000  # every channel pings an idle connection this often

CHANNEL_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", 10_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    # Each channel its own TCP connection, so separate clients do not share one HTTP/2 pipe.
    ("grpc.use_local_subchannel_pool", 1),
    ("grpc.enable_retries", 0),
    # A restarted peer should be reachable again within a second or two, not after gRPC's
    # default exponential backoff (up to 120 s); callers do their own retries with deadlines.
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


def aio_channel(target: str) -> grpc.aio.Channel:
    """An asyncio channel to another service at `host:port`: mutual TLS with this process's
    certificate when internal TLS is installed (`tls.install`), else plaintext; traced when
    tracing is configured."""
    credentials = tls.channel_credentials()
    interceptors = tracing.aio_client_interceptors()
    if credentials is None:
        return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS, interceptors=interceptors)
    return grpc.aio.secure_channel(
        target, credentials, options=CHANNEL_OPTIONS, interceptors=interceptors
    )


def tls_channel_credentials(
    ca_location: str = "", certificate_location: str = "", key_location: str = ""
) -> grpc.ChannelCredentials:
    """TLS credentials from PEM files (Kafka's ssl.ca.location, ssl.certificate.location,
    ssl.key.location): an empty CA trusts the system roots; a certificate and key present a
    client certificate (mTLS). OSError when a file cannot be read."""

    def read(path: str) -> bytes | None:
        if not path:
            return None
        with open(path, "rb") as f:
            return f.read()

    return grpc.ssl_channel_credentials(
        root_certificates=read(ca_location),
        private_key=read(key_location),
        certificate_chain=read(certificate_location),
    )


def sync_channel(target: str, credentials: grpc.ChannelCredentials | None = None) -> grpc.Channel:
    """A blocking channel to `host:port` (TLS with `credentials`); traced when tracing is
    configured."""
    if credentials is None:
        channel = grpc.insecure_channel(target, options=CHANNEL_OPTIONS)
    else:
        channel = grpc.secure_channel(target, credentials, options=CHANNEL_OPTIONS)
    interceptor = tracing.client_interceptor()
    if interceptor is None:
        return channel
    # OpenTelemetry's sync interceptor is a grpcext one: grpc.intercept_channel refuses it.
    from opentelemetry.instrumentation.grpc import grpcext

    return grpcext.intercept_channel(channel, interceptor)  # type: ignore[no-untyped-call]
