"""The one server interceptor that maps exceptions to gRPC statuses.

RiverlogError → its catalog status, message and code trailer. Anything else is a bug: it is
logged with its traceback and the caller sees a sanitized INTERNAL, never the exception text.
A request message that does not parse is the caller's error, not a bug: the deserializer hands
the handler an `_Undecodable` marker instead of raising inside gRPC (which logged a traceback
per message and answered UNKNOWN with the parser's exception text, or INTERNAL mid-stream), and
the call fails with INVALID_REQUEST (INVALID_ARGUMENT). Status details are cut to
`MAX_DETAILS_BYTES` of UTF-8: they travel percent-encoded in a header, and a message quoting a
long client-sent name once made the trailer exceed the client's metadata limit, so the client
saw RESOURCE_EXHAUSTED instead of the error.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError

from .status import trailing_metadata_for

log = logging.getLogger(__name__)

MAX_DETAILS_BYTES = 1024


def bounded_details(message: str) -> str:
    """`message`, cut to MAX_DETAILS_BYTES of UTF-8 (on a character boundary) with a note."""
    raw = message.encode("utf-8", "replace")
    if len(raw) <= MAX_DETAILS_BYTES:
        return message
    cut = raw[:MAX_DETAILS_BYTES].decode("utf-8", "ignore")
    return f"{cut}... ({len(raw) - len(cut.encode())} more bytes)"


class _Undecodable:
    """Stands for a request message whose bytes did not parse."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def error(self) -> RiverlogError:
        return RiverlogError(
            f"undecodable request message: {self.reason}", ErrorCode.INVALID_REQUEST
        )


def _tolerant(deserializer: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # protobuf's DecodeError has no stable import path
            return _Undecodable(str(exc)[:200])

    return parse


async def _checked(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for request in requests:
        if isinstance(request, _Undecodable):
            raise request.error()
        yield request


def _request(request: Any) -> Any:
    """The request a handler sees: a stream's messages are checked as they are read."""
    if isinstance(request, _Undecodable):
        raise request.error()
    if hasattr(request, "__aiter__"):
        return _checked(request)
    return request


async def _abort(context: grpc.aio.ServicerContext, method: str, exc: BaseException) -> None:
    if isinstance(exc, RiverlogError):
        context.set_trailing_metadata(trailing_metadata_for(exc))
        await context.abort(exc.grpc_status, bounded_details(exc.message))
    log.exception("[%s] unexpected error", method, exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, "internal server error (see the server log)")


def _wrap_unary(method: str, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await behavior(_request(request), context)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await _abort(context, method, exc)

    return wrapped


def _wrap_stream(method: str, behavior: Callable[..., Any]) -> Callable[..., Any]:
    if not inspect.isasyncgenfunction(behavior):
        return _wrap_unary(method, behavior)

    async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            async for item in behavior(_request(request), context):
                yield item
        except grpc.aio.AbortError:
            raise
        except Exception as exc:
            await _abort(context, method, exc)

    return wrapped


class ErrorInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        if handler.request_deserializer is not None:
            handler = handler._replace(request_deserializer=_tolerant(handler.request_deserializer))
        if handler.unary_unary:
            return handler._replace(unary_unary=_wrap_unary(method, handler.unary_unary))
        if handler.stream_unary:
            return handler._replace(stream_unary=_wrap_unary(method, handler.stream_unary))
        if handler.unary_stream:
            return handler._replace(unary_stream=_wrap_stream(method, handler.unary_stream))
        if handler.stream_stream:
            return handler._replace(stream_stream=_wrap_stream(method, handler.stream_stream))
        return handler
