"""Whole-request failures on the wire: a gRPC status plus the Riverlog code in trailing metadata.

Servers raise RiverlogError anywhere in a handler; `ErrorInterceptor` turns it into the mapped
gRPC status with the code in the `riverlog-error-code` trailer. Clients call `from_rpc_error`
to rebuild the same exception, so callers catch RiverlogError whatever the transport said.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

import grpc

from riverlog.common.errors import ErrorCode, RiverlogError, code_of

ERROR_CODE_KEY = "riverlog-error-code"

# Transport failures that say nothing about the request itself: worth a retry elsewhere.
_TRANSPORT_CODES: dict[grpc.StatusCode, ErrorCode] = {
    grpc.StatusCode.UNAVAILABLE: ErrorCode.NETWORK_EXCEPTION,
    grpc.StatusCode.DEADLINE_EXCEEDED: ErrorCode.REQUEST_TIMED_OUT,
    grpc.StatusCode.CANCELLED: ErrorCode.NETWORK_EXCEPTION,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ErrorCode.MESSAGE_TOO_LARGE,
    grpc.StatusCode.INVALID_ARGUMENT: ErrorCode.INVALID_REQUEST,
    grpc.StatusCode.UNIMPLEMENTED: ErrorCode.UNSUPPORTED_VERSION,
}


def trailing_metadata_for(error: RiverlogError) -> tuple[tuple[str, str], ...]:
    return ((ERROR_CODE_KEY, str(int(error.code))),)


def from_rpc_error(error: grpc.RpcError) -> RiverlogError:
    """The RiverlogError a failed call stands for (transport failures included)."""
    trailers = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in trailers or ():
        if key == ERROR_CODE_KEY:
            return RiverlogError(error.details() or None, code_of(int(value)))
    status = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    code = _TRANSPORT_CODES.get(status, ErrorCode.UNKNOWN_SERVER_ERROR)
    details = error.details() if hasattr(error, "details") else str(error)
    return RiverlogError(f"{status.name}: {details}", code)


_R = TypeVar("_R")


async def answer_of(call: Awaitable[_R]) -> _R:
    """Await a unary call whose answer carries `error_code` / `error_message`: the answer, or
    RiverlogError from the gRPC status or from that code (one place for the pattern every peer
    writing markers repeats)."""
    try:
        response = await call
    except grpc.RpcError as exc:
        raise from_rpc_error(exc) from exc
    code = code_of(response.error_code)  # type: ignore[attr-defined]
    if code != ErrorCode.NONE:
        raise RiverlogError(response.error_message or None, code)  # type: ignore[attr-defined]
    return response
