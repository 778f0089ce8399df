"""ACL bindings as stored: the key schema (names with any character), the value codec, the
table fed by the etcd follower, and the pure builders of CreateAcls and DeleteAcls."""

from __future__ import annotations

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
from riverlog.services.metadata.acl_records import (
    AclTable,
    after_create,
    after_delete,
    entries_decode,
    entries_encode,
    pattern_key,
    pattern_of_key,
)

T = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
G = ResourcePattern(ResourceType.GROUP, "team/a b", PatternType.PREFIXED)
READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermission.ALLOW)
DENY = AccessControlEntry("User:*", "10.0.0.1", AclOperation.ALL, AclPermission.DENY)


def test_keys_round_trip_any_name() -> None:
    assert pattern_key(T) == "acls/TOPIC/LITERAL/orders"
    key = pattern_key(G)
    assert key.count("/") == 3  # the slash in the name is quoted
    assert pattern_of_key(key) == G


def test_entries_round_trip() -> None:
    assert entries_decode(entries_encode({READ, DENY})) == {READ, DENY}


def test_table_absorbs_sets_deletes_and_skips_malformed() -> None:
    table = AclTable()
    table.absorb(pattern_key(T), entries_encode({READ}))
    table.absorb(pattern_key(G), entries_encode({DENY}))
    table.absorb("acls/NOPE/LITERAL/x", b"[]")
    table.absorb(pattern_key(T) + "x", b"not json")
    assert sorted(table.bindings(), key=str) == sorted(
        [AclBinding(T, READ), AclBinding(G, DENY)], key=str
    )
    table.absorb(pattern_key(T), None)
    assert table.bindings() == [AclBinding(G, DENY)]


def test_create_adds_entries_once_per_pattern() -> None:
    state = {T: frozenset({READ})}
    out = after_create(state, [AclBinding(T, READ), AclBinding(T, DENY), AclBinding(G, READ)])
    assert out == {T: frozenset({READ, DENY}), G: frozenset({READ})}
    assert state == {T: frozenset({READ})}  # pure


def test_delete_per_filter_with_what_each_deleted() -> None:
    state = {T: frozenset({READ, DENY}), G: frozenset({READ})}
    changed, deleted = after_delete(
        state,
        [
            AclBindingFilter(principal="User:alice"),
            AclBindingFilter(ResourceType.TOPIC),  # only what the first left
            AclBindingFilter(ResourceType.CLUSTER),
        ],
    )
    assert changed == {T: frozenset(), G: frozenset()}
    assert sorted(deleted[0], key=str) == sorted(
        [AclBinding(T, READ), AclBinding(G, READ)], key=str
    )
    assert deleted[1] == [AclBinding(T, DENY)]
    assert deleted[2] == []
