"""ACL bindings in etcd: the key schema, the value codec, the table every instance keeps, and
the pure builders of the writes CreateAcls and DeleteAcls make (decision 0032).

As Kafka's ZooKeeper layout (one znode per resource pattern holding its entries), each resource
pattern is one key in the client sub-tree, which the client-quota book follows and publishes:

    P client/acls/<RESOURCE_TYPE>/<PATTERN_TYPE>/<url-quoted name>   JSON [[principal, host,
                                                                      operation, permission]]

so a write touches one key per pattern and is one fenced transaction compared with the
revisions it read. Group names and transactional ids may hold any character, hence the quoting.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Final
from urllib.parse import quote, unquote

from riverlog.common.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
)

log = logging.getLogger(__name__)

ACLS: Final = "acls/"
"""The sub-tree's name under the client prefix."""

Entries = frozenset[AccessControlEntry]
AclState = Mapping[ResourcePattern, Entries]


def pattern_key(p: ResourcePattern) -> str:
    """The key of a pattern, relative to the client prefix."""
    return f"{ACLS}{p.resource_type.name}/{p.pattern_type.name}/{quote(p.name, safe='')}"


def pattern_of_key(rel: str) -> ResourcePattern:
    """The pattern a relative key names; ValueError/KeyError when it names none."""
    rtype, ptype, name = rel[len(ACLS) :].split("/", 2)
    return ResourcePattern(ResourceType[rtype], unquote(name), PatternType[ptype])


def entries_encode(entries: Iterable[AccessControlEntry]) -> bytes:
    rows = sorted([e.principal, e.host, e.operation.name, e.permission.name] for e in entries)
    return json.dumps(rows).encode()


def entries_decode(raw: bytes) -> Entries:
    return frozenset(
        AccessControlEntry(str(p), str(h), AclOperation[o], AclPermission[perm])
        for p, h, o, perm in json.loads(raw)
    )


class AclTable:
    """The bindings as stored, by pattern; fed by the client-quota book's etcd follower on
    the event loop."""

    def __init__(self) -> None:
        self.patterns: dict[ResourcePattern, Entries] = {}

    def clear(self) -> None:
        self.patterns.clear()

    def absorb(self, rel: str, value: bytes | None) -> None:
        """Fold one key's new value (None: deleted); a malformed key or value is logged."""
        try:
            pattern = pattern_of_key(rel)
            if value is None:
                self.patterns.pop(pattern, None)
            else:
                self.patterns[pattern] = entries_decode(value)
        except (ValueError, KeyError, TypeError) as exc:
            log.error("ignoring malformed ACL entry at %s: %s", rel, exc)

    def bindings(self) -> list[AclBinding]:
        return [AclBinding(p, e) for p, entries in self.patterns.items() for e in entries]


def after_create(
    state: AclState, creations: Sequence[AclBinding]
) -> dict[ResourcePattern, Entries]:
    """The entries of every pattern `creations` touch, once they are added (existing
    bindings stay once: creating twice is not an error, as Kafka's). Pure."""
    out: dict[ResourcePattern, Entries] = {}
    for b in creations:
        current = out.get(b.pattern, state.get(b.pattern, frozenset()))
        out[b.pattern] = current | {b.entry}
    return out


def after_delete(
    state: AclState, filters: Sequence[AclBindingFilter]
) -> tuple[dict[ResourcePattern, Entries], list[list[AclBinding]]]:
    """The entries of every pattern a filter matches in, once the matching bindings are gone
    (empty: delete the key), and the bindings each filter deleted, per filter. Pure."""
    changed: dict[ResourcePattern, Entries] = {}
    deleted: list[list[AclBinding]] = []
    for f in filters:
        mine: list[AclBinding] = []
        for pattern, entries in sorted(state.items(), key=lambda kv: str(kv[0])):
            current = changed.get(pattern, entries)
            gone = {e for e in current if f.matches(AclBinding(pattern, e))}
            if gone:
                changed[pattern] = current - gone
                mine.extend(AclBinding(pattern, e) for e in sorted(gone, key=str))
        deleted.append(mine)
    return changed, deleted
