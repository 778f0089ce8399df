"""Filters (Kafka's AclBindingFilter, with MATCH), validation of bindings, and the proto
round trip."""

from __future__ import annotations

import pytest

from riverlog.common.acl.convert import (
    binding_from_proto,
    binding_to_proto,
    filter_from_proto,
    filter_to_proto,
)
from riverlog.common.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
    validate_binding,
)
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import acls_pb2


def b(
    name: str,
    pattern: PatternType = PatternType.LITERAL,
    principal: str = "User:alice",
    rtype: ResourceType = ResourceType.TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, pattern),
        AccessControlEntry(principal, "*", AclOperation.READ, AclPermission.ALLOW),
    )


def test_filter_any_matches_everything() -> None:
    assert AclBindingFilter().matches(b("t"))


def test_filter_literal_name_and_pattern_type() -> None:
    f = AclBindingFilter(ResourceType.TOPIC, "sales-", PatternType.PREFIXED)
    assert f.matches(b("sales-", PatternType.PREFIXED))
    assert not f.matches(b("sales-"))
    assert not f.matches(b("sales-", PatternType.PREFIXED, rtype=ResourceType.GROUP))


def test_filter_match_finds_every_pattern_covering_a_name() -> None:
    f = AclBindingFilter(ResourceType.TOPIC, "sales-eu", PatternType.MATCH)
    assert f.matches(b("sales-eu"))
    assert f.matches(b("*"))
    assert f.matches(b("sales-", PatternType.PREFIXED))
    assert not f.matches(b("sales-us"))
    assert not f.matches(b("sales-eu-x", PatternType.PREFIXED))


def test_filter_principal_and_permission() -> None:
    assert not AclBindingFilter(principal="User:bob").matches(b("t"))
    assert not AclBindingFilter(permission=AclPermission.DENY).matches(b("t"))
    assert AclBindingFilter(operation=AclOperation.READ).matches(b("t"))


@pytest.mark.parametrize(
    "binding",
    [
        b("t", principal="alice"),
        b("t", principal="Group:x"),
        b(""),
        b("*", PatternType.PREFIXED),
        b("t", PatternType.MATCH),
        b("other", rtype=ResourceType.CLUSTER),
        b("t", rtype=ResourceType.ANY),
    ],
)
def test_invalid_bindings_are_refused(binding: AclBinding) -> None:
    with pytest.raises(RiverlogError) as info:
        validate_binding(binding)
    assert info.value.code == ErrorCode.INVALID_REQUEST


def test_valid_binding_passes() -> None:
    validate_binding(b("kafka-cluster", rtype=ResourceType.CLUSTER))
    validate_binding(b("*", principal="User:*"))


def test_proto_round_trip() -> None:
    binding = b("sales-", PatternType.PREFIXED)
    assert binding_from_proto(binding_to_proto(binding)) == binding
    f = AclBindingFilter(ResourceType.GROUP, None, PatternType.ANY, "User:bob")
    assert filter_from_proto(filter_to_proto(f)) == f


def test_unknown_enum_value_is_refused() -> None:
    with pytest.raises(RiverlogError) as info:
        binding_from_proto(acls_pb2.AclBinding(resource_type=0))  # type: ignore[arg-type]
    assert info.value.code == ErrorCode.INVALID_REQUEST
