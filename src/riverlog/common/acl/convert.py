"""Converters between the ACL model and acls.proto, shared by the metadata service (which
stores and publishes bindings), the gateways (which enforce them) and the SDK and CLI (which
build the requests). The enum numbers are Kafka's on both sides; 0 (unknown) is refused."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import acls_pb2

from .model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
)

_E = TypeVar("_E", ResourceType, PatternType, AclOperation, AclPermission)


def _enum(kind: type[_E], value: int, what: str) -> _E:
    try:
        return kind(value)
    except ValueError:
        raise RiverlogError(f"unknown {what} {value}", ErrorCode.INVALID_REQUEST) from None


def binding_to_proto(b: AclBinding) -> acls_pb2.AclBinding:
    return acls_pb2.AclBinding(
        resource_type=int(b.pattern.resource_type),  # type: ignore[arg-type]
        resource_name=b.pattern.name,
        pattern_type=int(b.pattern.pattern_type),  # type: ignore[arg-type]
        principal=b.entry.principal,
        host=b.entry.host,
        operation=int(b.entry.operation),  # type: ignore[arg-type]
        permission_type=int(b.entry.permission),  # type: ignore[arg-type]
    )


def binding_from_proto(msg: acls_pb2.AclBinding) -> AclBinding:
    """The binding as sent (not validated: `model.validate_binding` is the write's check);
    RiverlogError(INVALID_REQUEST) for an enum value outside Kafka's."""
    return AclBinding(
        ResourcePattern(
            _enum(ResourceType, msg.resource_type, "resource type"),
            msg.resource_name,
            _enum(PatternType, msg.pattern_type, "pattern type"),
        ),
        AccessControlEntry(
            msg.principal,
            msg.host,
            _enum(AclOperation, msg.operation, "operation"),
            _enum(AclPermission, msg.permission_type, "permission type"),
        ),
    )


def bindings_to_proto(bindings: Iterable[AclBinding]) -> list[acls_pb2.AclBinding]:
    return [binding_to_proto(b) for b in bindings]


def filter_to_proto(f: AclBindingFilter) -> acls_pb2.AclBindingFilter:
    out = acls_pb2.AclBindingFilter(
        resource_type=int(f.resource_type),  # type: ignore[arg-type]
        pattern_type=int(f.pattern_type),  # type: ignore[arg-type]
        operation=int(f.operation),  # type: ignore[arg-type]
        permission_type=int(f.permission),  # type: ignore[arg-type]
    )
    if f.name is not None:
        out.resource_name = f.name
    if f.principal is not None:
        out.principal = f.principal
    if f.host is not None:
        out.host = f.host
    return out


def filter_from_proto(msg: acls_pb2.AclBindingFilter) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=_enum(ResourceType, msg.resource_type, "resource type"),
        name=msg.resource_name if msg.HasField("resource_name") else None,
        pattern_type=_enum(PatternType, msg.pattern_type, "pattern type"),
        principal=msg.principal if msg.HasField("principal") else None,
        host=msg.host if msg.HasField("host") else None,
        operation=_enum(AclOperation, msg.operation, "operation"),
        permission=_enum(AclPermission, msg.permission_type, "permission type"),
    )
