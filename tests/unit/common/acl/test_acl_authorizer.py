"""Kafka's AclAuthorizer cases (AclAuthorizerTest): literal, prefixed and wildcard patterns,
deny over allow, super users, implied operations, host and principal wildcards, the
no-ACL default, and the decision cache over a changed index."""

from __future__ import annotations

import pytest

from riverlog.common.acl.authorizer import AclIndex, Authorizer
from riverlog.common.acl.model import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
)

TOPIC = ResourceType.TOPIC
GROUP = ResourceType.GROUP
LIT = PatternType.LITERAL
PRE = PatternType.PREFIXED
R = AclOperation
ALLOW = AclPermission.ALLOW
DENY = AclPermission.DENY
ALICE = "User:alice"
BOB = "User:bob"
HOST = "192.168.0.1"


def acl(
    name: str,
    op: AclOperation,
    principal: str = ALICE,
    permission: AclPermission = ALLOW,
    host: str = "*",
    pattern: PatternType = LIT,
    rtype: ResourceType = TOPIC,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(rtype, name, pattern), AccessControlEntry(principal, host, op, permission)
    )


def authorizer(*bindings: AclBinding, **kw: object) -> Authorizer:
    return Authorizer(AclIndex(bindings), **kw)  # type: ignore[arg-type]


def test_literal_allows_only_that_name_and_operation() -> None:
    a = authorizer(acl("orders", R.READ))
    assert a.authorize(ALICE, HOST, R.READ, TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, R.WRITE, TOPIC, "orders")
    assert not a.authorize(BOB, HOST, R.READ, TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, R.READ, TOPIC, "orders2")  # no ACL, default deny
    assert not a.authorize(ALICE, HOST, R.READ, GROUP, "orders")  # other resource type


def test_prefixed_matches_names_starting_with_it() -> None:
    a = authorizer(acl("sales-", R.READ, pattern=PRE))
    assert a.authorize(ALICE, HOST, R.READ, TOPIC, "sales-eu")
    assert a.authorize(ALICE, HOST, R.READ, TOPIC, "sales-")
    assert not a.authorize(ALICE, HOST, R.READ, TOPIC, "sales")
    assert not a.authorize(ALICE, HOST, R.READ, TOPIC, "presales-eu")


def test_several_prefix_lengths_all_apply() -> None:
    a = authorizer(
        acl("a", R.READ, pattern=PRE),
        acl("abc", R.READ, permission=DENY, pattern=PRE),
        acl("ab", R.WRITE, pattern=PRE),
    )
    assert a.authorize(ALICE, HOST, R.READ, TOPIC, "abx")
    assert a.authorize(ALICE, HOST, R.WRITE, TOPIC, "abcd")
    assert not a.authorize(ALICE, HOST, R.READ, TOPIC, "abcd")  # the longer DENY applies
    assert not a.authorize(ALICE, HOST, R.WRITE, TOPIC, "a")


def test_wildcard_resource_matches_every_name() -> None:
    a = authorizer(acl("*", R.WRITE))
    assert a.authorize(ALICE, HOST, R.WRITE, TOPIC, "anything")
    assert a.authorize(ALICE, HOST, R.WRITE, TOPIC, "*")
    assert not a.authorize(ALICE, HOST, R.WRITE, GROUP, "anything")


def test_deny_wins_over_allow_from_any_pattern() -> None:
    a = authorizer(
        acl("*", R.READ),
        acl("secret", R.READ, permission=DENY),
        acl("hr-", R.ALL, permission=DENY, pattern=PRE),
    )
    assert a.authorize(ALICE, HOST, R.READ, TOPIC, "public")
    assert not a.authorize(ALICE, HOST, R.READ, TOPIC, "secret")
    assert not a.authorize(ALICE, HOST, R.READ, TOPIC, "hr-pay")  # DENY ALL denies READ


def test_deny_for_everyone_beats_allow_for_one() -> None:
    a = authorizer(acl("t", R.READ), acl("t", R.READ, principal="User:*", permission=DENY))
    assert not a.authorize(ALICE, HOST, R.READ, TOPIC, "t")


def test_allow_all_allows_every_operation() -> None:
    a = authorizer(acl("t", R.ALL))
    for op in (R.READ, R.WRITE, R.CREATE, R.DELETE, R.ALTER, R.DESCRIBE, R.ALTER_CONFIGS):
        assert a.authorize(ALICE, HOST, op, TOPIC, "t")


@pytest.mark.parametrize("op", [R.READ, R.WRITE, R.DELETE, R.ALTER])
def test_describe_is_implied_by_read_write_delete_alter(op: AclOperation) -> None:
    a = authorizer(acl("t", op))
    assert a.authorize(ALICE, HOST, R.DESCRIBE, TOPIC, "t")
    assert not a.authorize(ALICE, HOST, R.DESCRIBE_CONFIGS, TOPIC, "t")


def test_describe_configs_is_implied_by_alter_configs_only() -> None:
    a = authorizer(acl("t", R.ALTER_CONFIGS))
    assert a.authorize(ALICE, HOST, R.DESCRIBE_CONFIGS, TOPIC, "t")
    assert not a.authorize(ALICE, HOST, R.DESCRIBE, TOPIC, "t")
    b = authorizer(acl("t", R.DESCRIBE))
    assert not b.authorize(ALICE, HOST, R.READ, TOPIC, "t")  # implication goes one way


def test_deny_is_not_widened_by_implication() -> None:
    # Kafka: denying READ does not deny DESCRIBE, which a WRITE allows.
    a = authorizer(acl("t", R.READ, permission=DENY), acl("t", R.WRITE))
    assert not a.authorize(ALICE, HOST, R.READ, TOPIC, "t")
    assert a.authorize(ALICE, HOST, R.DESCRIBE, TOPIC, "t")


def test_host_must_match_unless_wildcard() -> None:
    a = authorizer(acl("t", R.READ, host=HOST), acl("t", R.WRITE, host="10.0.0.9"))
    assert a.authorize(ALICE, HOST, R.READ, TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.1", R.READ, TOPIC, "t")
    assert not a.authorize(ALICE, HOST, R.WRITE, TOPIC, "t")
    d = authorizer(acl("t", R.READ), acl("t", R.READ, permission=DENY, host="10.0.0.1"))
    assert d.authorize(ALICE, HOST, R.READ, TOPIC, "t")
    assert not d.authorize(ALICE, "10.0.0.1", R.READ, TOPIC, "t")


def test_wildcard_principal_matches_every_user() -> None:
    a = authorizer(acl("t", R.READ, principal="User:*"))
    assert a.authorize(ALICE, HOST, R.READ, TOPIC, "t")
    assert a.authorize("User:ANONYMOUS", HOST, R.READ, TOPIC, "t")


def test_super_users_are_allowed_everything_even_denied() -> None:
    a = authorizer(acl("t", R.ALL, principal="User:*", permission=DENY), super_users=[BOB])
    assert a.authorize(BOB, HOST, R.DELETE, TOPIC, "t")
    assert a.authorize(BOB, HOST, R.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, HOST, R.READ, TOPIC, "t")


def test_allow_everyone_if_no_acl_found_only_where_no_binding_covers() -> None:
    a = authorizer(acl("t", R.READ, principal=BOB), allow_if_no_acl=True)
    assert a.authorize(ALICE, HOST, R.WRITE, TOPIC, "other")  # nothing covers it
    assert not a.authorize(ALICE, HOST, R.READ, TOPIC, "t")  # bob's ACL covers it
    strict = authorizer(acl("t", R.READ, principal=BOB))
    assert not strict.authorize(ALICE, HOST, R.WRITE, TOPIC, "other")


def test_authorize_any_for_idempotent_producers() -> None:
    a = authorizer(acl("logs-", R.WRITE, pattern=PRE))
    assert a.authorize_any(ALICE, HOST, R.WRITE, TOPIC)
    assert not a.authorize_any(BOB, HOST, R.WRITE, TOPIC)
    denied = authorizer(acl("logs-", R.WRITE, pattern=PRE), acl("*", R.WRITE, permission=DENY))
    assert not denied.authorize_any(ALICE, HOST, R.WRITE, TOPIC)


def test_cached_decisions_belong_to_their_index() -> None:
    a = authorizer(acl("t", R.READ))
    assert a.authorize(ALICE, HOST, R.READ, TOPIC, "t")
    assert a.authorize(ALICE, HOST, R.READ, TOPIC, "t")  # from the cache
    b = authorizer(acl("t", R.READ, permission=DENY))
    assert not b.authorize(ALICE, HOST, R.READ, TOPIC, "t")


def test_index_deduplicates_and_counts() -> None:
    index = AclIndex([acl("t", R.READ), acl("t", R.READ), acl("u", R.READ, pattern=PRE)])
    assert len(index) == 2
