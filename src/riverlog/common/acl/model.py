"""Kafka's ACL model as values: who (principal, host) may or may not (permission) do what
(operation) to which resources (a resource pattern), and the filters that select bindings.

A binding is Kafka's `AclBinding`: a `ResourcePattern` (resource type, name, LITERAL or PREFIXED;
the LITERAL name `*` matches every resource of its type) and an `AccessControlEntry` (principal
`User:<name>` or `User:*`, host or `*`, operation, ALLOW or DENY). Filters (`AclBindingFilter`)
use ANY for "whatever" and, for the pattern type, MATCH for "every pattern that matches this
resource name" (literal, wildcard and prefixes), as kafka-acls.sh's `--resource-pattern-type`.
Everything here is pure and immutable; `validate_binding` is the one check every write runs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError

WILDCARD: Final = "*"
"""The resource name (LITERAL only), principal name and host that match everything."""

USER_TYPE: Final = "User"
WILDCARD_PRINCIPAL: Final = "User:*"
CLUSTER_NAME: Final = "kafka-cluster"
"""The one CLUSTER resource's name, as Kafka's."""


class ResourceType(enum.IntEnum):
    """Kafka's resource types, with its numbers (ANY only in filters)."""

    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(enum.IntEnum):
    """Kafka's pattern types (ANY and MATCH only in filters)."""

    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """Kafka's operations, with its numbers (ANY only in filters)."""

    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermission(enum.IntEnum):
    """Kafka's permission types (ANY only in filters)."""

    ANY = 1
    DENY = 2
    ALLOW = 3


IMPLIED_BY: Final[dict[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}
"""Kafka's implied operations: an ALLOW of any of these operations allows the key (a DENY is
never widened this way: denying READ does not deny DESCRIBE)."""


def allowed_by(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW allows `operation` (ALL aside)."""
    return IMPLIED_BY.get(operation, frozenset({operation}))


def principal_of(user: str) -> str:
    """The Kafka principal of an authenticated user name (ANONYMOUS is `User:ANONYMOUS`)."""
    return f"{USER_TYPE}:{user}"


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"{self.resource_type.name}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: AclPermission


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        e = self.entry
        return (
            f"({self.pattern}) {e.permission.name} {e.principal} from {e.host}"
            f" to {e.operation.name}"
        )


def _names_match(pattern: ResourcePattern, name: str) -> bool:
    """Whether `pattern` covers the resource called `name`."""
    if pattern.pattern_type == PatternType.PREFIXED:
        return name.startswith(pattern.name)
    return pattern.name in (WILDCARD, name)


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Kafka's AclBindingFilter: None (or ANY) matches anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermission = AclPermission.ANY

    def matches(self, binding: AclBinding) -> bool:
        p, e = binding.pattern, binding.entry
        if self.resource_type not in (ResourceType.ANY, p.resource_type):
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.name is not None and not _names_match(p, self.name):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, p.pattern_type):
                return False
            if self.name is not None and self.name != p.name:
                return False
        if self.principal is not None and self.principal != e.principal:
            return False
        if self.host is not None and self.host != e.host:
            return False
        if self.operation not in (AclOperation.ANY, e.operation):
            return False
        return self.permission in (AclPermission.ANY, e.permission)


def validate_principal(principal: str) -> None:
    kind, sep, name = principal.partition(":")
    if not sep or kind != USER_TYPE or not name:
        raise RiverlogError(
            f"invalid principal {principal!r}: expected User:<name> or User:*",
            ErrorCode.INVALID_REQUEST,
        )


def validate_binding(binding: AclBinding) -> None:
    """RiverlogError(INVALID_REQUEST) for a binding a filter value (ANY, MATCH) or a bad name
    slipped into, as Kafka's CreateAcls refuses them."""
    p, e = binding.pattern, binding.entry
    if p.resource_type == ResourceType.ANY:
        raise RiverlogError("a binding needs a resource type, not ANY", ErrorCode.INVALID_REQUEST)
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise RiverlogError(
            f"a binding's pattern type is LITERAL or PREFIXED, not {p.pattern_type.name}",
            ErrorCode.INVALID_REQUEST,
        )
    if not p.name:
        raise RiverlogError("a binding needs a resource name", ErrorCode.INVALID_REQUEST)
    if p.resource_type == ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        raise RiverlogError(
            f"the cluster resource is named {CLUSTER_NAME!r}", ErrorCode.INVALID_REQUEST
        )
    if p.pattern_type == PatternType.PREFIXED and p.name == WILDCARD:
        raise RiverlogError(
            "the wildcard name * is LITERAL (it already matches every name)",
            ErrorCode.INVALID_REQUEST,
        )
    validate_principal(e.principal)
    if not e.host:
        raise RiverlogError("a binding needs a host (or *)", ErrorCode.INVALID_REQUEST)
    if e.operation == AclOperation.ANY:
        raise RiverlogError("a binding needs an operation, not ANY", ErrorCode.INVALID_REQUEST)
    if e.permission == AclPermission.ANY:
        raise RiverlogError("a binding is ALLOW or DENY, not ANY", ErrorCode.INVALID_REQUEST)
