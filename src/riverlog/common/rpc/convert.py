"""Converters between the shared vocabulary of `riverlog.common` and the wire enums of
`riverlog.v1`: error codes (the same numbers on both sides, typed apart) and the request
options every service and client shares. Adapters call these at the rpc boundary; domain code
only ever sees the common types."""

from __future__ import annotations

from typing import cast

from riverlog.v1 import errors_pb2


def error_code_to_proto(code: int) -> errors_pb2.ErrorCode:
    """An `ErrorCode` (or its number) for a message's `error_code` field."""
    return cast(errors_pb2.ErrorCode, int(code))
