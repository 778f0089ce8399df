"""Kafka's AclAuthorizer decision, made in memory from an index of the bindings.

`authorize(principal, host, operation, resource_type, name)` follows Kafka's rules: a super
user is allowed everything; a resource no binding covers is allowed only with
`allow.everyone.if.no.acl.found`; otherwise any matching DENY refuses (deny wins), and a
matching ALLOW of the operation, of an operation that implies it (DESCRIBE by READ, WRITE,
DELETE, ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS) or of ALL allows. An entry matches when its
principal is the caller's or `User:*`, its host the caller's or `*`.

The index (`AclIndex`) keeps, per resource type, the LITERAL bindings by name (the wildcard
`*` among them) and the PREFIXED ones by prefix, with the set of prefix lengths in use, so the
bindings covering a name are found with one dict lookup per distinct prefix length rather
than a scan of every binding. Decisions are cached per (principal, host, operation, type,
name) until the bindings change (a new `Authorizer` is built on every change): the produce
and fetch paths ask once per partition and mostly ask the same questions again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from .model import (
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourceType,
    allowed_by,
)

_CACHE_MAX: Final = 100_000
"""Entries in the decision cache before it starts over (bounds memory under many names)."""

_Key = tuple[str, str, AclOperation, ResourceType, str]


@dataclass(slots=True)
class _TypeIndex:
    """The bindings of one resource type."""

    literal: dict[str, list[AccessControlEntry]] = field(default_factory=dict)
    prefixed: dict[str, list[AccessControlEntry]] = field(default_factory=dict)
    prefix_lengths: list[int] = field(default_factory=list)

    def covering(self, name: str) -> list[AccessControlEntry]:
        """Every entry of a binding whose pattern covers `name`."""
        out: list[AccessControlEntry] = []
        exact = self.literal.get(name)
        if exact:
            out.extend(exact)
        if name != WILDCARD:
            wildcard = self.literal.get(WILDCARD)
            if wildcard:
                out.extend(wildcard)
        prefixed = self.prefixed
        for length in self.prefix_lengths:
            if length > len(name):
                break
            entries = prefixed.get(name[:length])
            if entries:
                out.extend(entries)
        return out


class AclIndex:
    """An immutable index of bindings (built once per change of the bindings)."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self._types: dict[ResourceType, _TypeIndex] = {}
        self.bindings: tuple[AclBinding, ...] = tuple(sorted(set(bindings), key=str))
        for binding in self.bindings:
            index = self._types.setdefault(binding.pattern.resource_type, _TypeIndex())
            table = (
                index.prefixed
                if binding.pattern.pattern_type == PatternType.PREFIXED
                else index.literal
            )
            table.setdefault(binding.pattern.name, []).append(binding.entry)
        for index in self._types.values():
            index.prefix_lengths = sorted({len(p) for p in index.prefixed})

    def __len__(self) -> int:
        return len(self.bindings)

    def covering(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        index = self._types.get(resource_type)
        return index.covering(name) if index is not None else []

    def of_type(self, resource_type: ResourceType) -> list[AccessControlEntry]:
        index = self._types.get(resource_type)
        if index is None:
            return []
        return [e for table in (index.literal, index.prefixed) for es in table.values() for e in es]


def _applies(entry: AccessControlEntry, principal: str, host: str) -> bool:
    return entry.principal in (principal, WILDCARD_PRINCIPAL) and entry.host in (host, WILDCARD)


class Authorizer:
    """Decisions over one `AclIndex`. Immutable but for its cache; one event loop uses it.

    `super_users`: principals (`User:admin`) allowed everything. `allow_if_no_acl`: Kafka's
    allow.everyone.if.no.acl.found, for resources no binding covers.
    """

    def __init__(
        self,
        index: AclIndex,
        super_users: Sequence[str] = (),
        allow_if_no_acl: bool = False,
    ) -> None:
        self.index = index
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._cache: dict[_Key, bool] = {}

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        key = (principal, host, operation, resource_type, name)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        decision = self._decide(principal, host, operation, resource_type, name)
        if len(self._cache) >= _CACHE_MAX:
            self._cache.clear()
        self._cache[key] = decision
        return decision

    def _decide(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
    ) -> bool:
        if principal in self.super_users:
            return True
        entries = self.index.covering(resource_type, name)
        if not entries:
            return self.allow_if_no_acl
        applying = [e for e in entries if _applies(e, principal, host)]
        for e in applying:
            if e.permission == AclPermission.DENY and e.operation in (operation, AclOperation.ALL):
                return False
        allowing = allowed_by(operation)
        return any(
            e.permission == AclPermission.ALLOW
            and (e.operation == AclOperation.ALL or e.operation in allowing)
            for e in applying
        )

    def authorize_any(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Whether some resource of `resource_type` may get `operation` (Kafka's
        authorizeByResourceType, e.g. an idempotent producer with WRITE on any topic). Simpler
        than Kafka's: an ALLOW anywhere counts unless a DENY on the wildcard name refuses every
        resource; a DENY on some names only does not take the type away."""
        if principal in self.super_users:
            return True
        for e in self.index.covering(resource_type, WILDCARD):
            if (
                e.permission == AclPermission.DENY
                and e.operation in (operation, AclOperation.ALL)
                and _applies(e, principal, host)
            ):
                return False
        allowing = allowed_by(operation)
        if any(
            e.permission == AclPermission.ALLOW
            and (e.operation == AclOperation.ALL or e.operation in allowing)
            and _applies(e, principal, host)
            for e in self.index.of_type(resource_type)
        ):
            return True
        return self.allow_if_no_acl and not self.index.of_type(resource_type)
