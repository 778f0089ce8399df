"""What an internal server saw of its callers' certificates, per RPC method (decision 0035).

Under internal TLS every server counts its calls by (method, the common name of the verified
client certificate gRPC reports in the call's auth context, `x509_common_name`), logs the first
call of each pair, and answers `/riverlog.debug.PeerCertificates/Describe` (no proto: an empty
request, a JSON answer `{"transport": "ssl", "methods": {method: {common name: calls}}}`) so an
operator or a test can see, from the servers' side, that every channel into a process is
encrypted and whose certificate each carries. A call without a certificate is counted under
"" (it cannot happen under TLS with client.auth=required: the handshake refuses it first).
"""

from __future__ import annotations

import inspect
import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Final

import grpc

log = logging.getLogger(__name__)

SERVICE: Final = "riverlog.debug.PeerCertificates"
DESCRIBE_METHOD: Final = f"/{SERVICE}/Describe"
COMMON_NAME_KEY: Final = "x509_common_name"
TRANSPORT_KEY: Final = "transport_security_type"


def _first(values: Iterable[bytes | str] | None) -> str:
    for value in values or ():
        return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return ""


def peer_identity(context: grpc.aio.ServicerContext) -> tuple[str, str]:
    """(the verified client certificate's common name, the transport security type as gRPC
    names it: "ssl") of a call; "" for what it does not have. One auth-context read."""
    auth = context.auth_context()
    return _first(auth.get(COMMON_NAME_KEY)), _first(auth.get(TRANSPORT_KEY))


class PeerCertificates:
    """Call counts by (method, peer common name). Lifecycle: one per server; only the server's
    event loop touches it."""

    def __init__(self) -> None:
        self.calls: Counter[tuple[str, str]] = Counter()
        self.transports: set[str] = set()

    def record(self, method: str, common_name: str, transport: str) -> None:
        key = (method, common_name)
        if key not in self.calls:
            log.info(
                "first %s call from peer certificate CN=%r (%s)", method, common_name, transport
            )
        self.calls[key] += 1
        self.transports.add(transport)

    def describe(self) -> dict[str, Any]:
        methods: dict[str, dict[str, int]] = {}
        for (method, name), count in sorted(self.calls.items()):
            methods.setdefault(method, {})[name] = count
        return {"transport": ",".join(sorted(self.transports)), "methods": methods}

    def interceptor(self) -> PeerCertificateInterceptor:
        return PeerCertificateInterceptor(self)

    def handler(self) -> grpc.GenericRpcHandler:
        """The Describe method, as a generic handler (bytes in, JSON bytes out)."""

        async def describe(_request: bytes, _context: grpc.aio.ServicerContext) -> bytes:
            return json.dumps(self.describe(), sort_keys=True).encode()

        return grpc.method_handlers_generic_handler(
            SERVICE, {"Describe": grpc.unary_unary_rpc_method_handler(describe)}
        )


def _unary(
    seen: PeerCertificates, method: str, behavior: Callable[..., Awaitable[Any]]
) -> Callable[..., Awaitable[Any]]:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
        seen.record(method, *peer_identity(context))
        return await behavior(request, context)

    return wrapped


def _stream(
    seen: PeerCertificates, method: str, behavior: Callable[..., Any]
) -> Callable[..., Any]:
    if not inspect.isasyncgenfunction(behavior):  # a handler that writes with context.write
        return _unary(seen, method, behavior)

    async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        seen.record(method, *peer_identity(context))
        async for item in behavior(request, context):
            yield item

    return wrapped


class PeerCertificateInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Records each call's peer certificate before its handler runs."""

    def __init__(self, seen: PeerCertificates) -> None:
        self._seen = seen

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        seen = self._seen
        if handler.unary_unary:
            return handler._replace(unary_unary=_unary(seen, method, handler.unary_unary))
        if handler.stream_unary:
            return handler._replace(stream_unary=_unary(seen, method, handler.stream_unary))
        if handler.unary_stream:
            return handler._replace(unary_stream=_stream(seen, method, handler.unary_stream))
        if handler.stream_stream:
            return handler._replace(stream_stream=_stream(seen, method, handler.stream_stream))
        return handler
