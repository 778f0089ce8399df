"""The one server interceptor that maps exceptions to gRPC statuses.

RiverlogError → its catalog status, message and code trailer. Anything else is a bug: it is
logged with its traceback and the caller sees a sanitized INTERNAL, never the exception text.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from riverlog.common.errors import RiverlogError

from .status import trailing_metadata_for

log = logging.getLogger(__name__)


async def _abort(context: grpc.aio.ServicerContext, method: str, exc: BaseException) -> None:
    if isinstance(exc, RiverlogError):
        context.set_trailing_metadata(trailing_metadata_for(exc))
        await context.abort(exc.grpc_status, exc.message)
    log.exception("[%s] unexpected error", method, exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, "internal server error (see the server log)")


def _wrap_unary(method: str, behavior: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await behavior(request, context)
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
            async for item in behavior(request, context):
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
        if handler.unary_unary:
            return handler._replace(unary_unary=_wrap_unary(method, handler.unary_unary))
        if handler.stream_unary:
            return handler._replace(stream_unary=_wrap_unary(method, handler.stream_unary))
        if handler.unary_stream:
            return handler._replace(unary_stream=_wrap_stream(method, handler.unary_stream))
        if handler.stream_stream:
            return handler._replace(stream_stream=_wrap_stream(method, handler.stream_stream))
        return handler
