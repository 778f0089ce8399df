"""Converters between the shared vocabulary of `riverlog.common` and the wire enums of
`riverlog.v1`: error codes (the same numbers on both sides, typed apart) and the request
options every service shares (`Acks`, numbered differently on the wire; `IsolationLevel` and
`OffsetSpec`). Adapters call these at the rpc boundary; domain code only sees the common types.
A wire value the enum does not define converts to None, which the domain refuses with the
error Kafka gives."""

from __future__ import annotations

from typing import Final, cast

from riverlog.common.types import Acks, IsolationLevel, OffsetSpec
from riverlog.v1 import common_pb2, errors_pb2

_ACKS_TO_PROTO: Final[dict[Acks, int]] = {
    Acks.LEADER: common_pb2.ACKS_LEADER,
    Acks.NONE: common_pb2.ACKS_NONE,
    Acks.ALL: common_pb2.ACKS_ALL,
}
_ACKS_FROM_PROTO: Final[dict[int, Acks]] = {v: k for k, v in _ACKS_TO_PROTO.items()}
_ISOLATION_LEVELS: Final = {int(level): level for level in IsolationLevel}
_OFFSET_SPECS: Final = {int(spec): spec for spec in OffsetSpec}


def error_code_to_proto(code: int) -> errors_pb2.ErrorCode:
    """An `ErrorCode` (or its number) for a message's `error_code` field."""
    return cast(errors_pb2.ErrorCode, int(code))


def acks_to_proto(acks: Acks) -> common_pb2.Acks:
    return cast(common_pb2.Acks, _ACKS_TO_PROTO[acks])


def acks_from_proto(value: int) -> Acks | None:
    """None for a value the wire enum does not define (answered with INVALID_REQUIRED_ACKS)."""
    return _ACKS_FROM_PROTO.get(int(value))


def isolation_level_to_proto(level: IsolationLevel) -> common_pb2.IsolationLevel:
    return cast(common_pb2.IsolationLevel, int(level))


def isolation_level_from_proto(value: int) -> IsolationLevel | None:
    """None for a value the wire enum does not define (refused as INVALID_REQUEST)."""
    return _ISOLATION_LEVELS.get(int(value))


def offset_spec_to_proto(spec: OffsetSpec) -> common_pb2.OffsetSpec:
    return cast(common_pb2.OffsetSpec, int(spec))


def offset_spec_from_proto(value: int) -> OffsetSpec | None:
    """None for a value the wire enum does not define (refused as INVALID_REQUEST)."""
    return _OFFSET_SPECS.get(int(value))
