"""The package surface: registry, protocol ids, the pre-filtering every assignor shares, and the
Java orderings the assignors replay."""

from __future__ import annotations

import pytest
from assignor_testkit import assign, sub, tp

from riverlog.common.assignors import (
    ASSIGNORS,
    Assignment,
    CooperativeStickyAssignor,
    RangeAssignor,
    RebalanceProtocol,
    RoundRobinAssignor,
    StickyAssignor,
    assignor_for,
)
from riverlog.common.assignors.javaorder import (
    JavaHashSet,
    java_hash_order,
    java_str_key,
    java_string_hash,
    topic_partition_hash,
)

KINDS = {
    "range": RangeAssignor,
    "roundrobin": RoundRobinAssignor,
    "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
}


def test_registry_has_kafkas_four_assignors():
    assert set(ASSIGNORS) == set(KINDS)
    for name, cls in KINDS.items():
        made = assignor_for(name)
        assert isinstance(made, cls) and made.name == name
        assert assignor_for(name) is not made  # stateful assignors are never shared


def test_unknown_assignor_names_the_known_ones():
    with pytest.raises(ValueError, match=r"'fair'.*cooperative-sticky, range, roundrobin, sticky"):
        assignor_for("fair")


@pytest.mark.parametrize("name", ["range", "roundrobin", "sticky"])
def test_eager_only_assignors(name):
    assert assignor_for(name).supported_protocols == (RebalanceProtocol.EAGER,)


def test_rebalance_protocol_ids_are_kafkas():
    assert (RebalanceProtocol.EAGER, RebalanceProtocol.COOPERATIVE) == (0, 1)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_member_gets_an_assignment_sorted_and_without_user_data(name):
    subs = {"b": sub(["y", "x"]), "a": sub(["x"]), "idle": sub(["nothing"])}
    result = assignor_for(name).assign({"x": 3, "y": 2, "z": 4, "nothing": 0}, subs)
    assert set(result) == {"a", "b", "idle"}
    assert result["idle"] == Assignment([])
    for assignment in result.values():
        assert assignment.partitions == sorted(assignment.partitions)
        assert assignment.user_data is None
    assigned = [p for a in result.values() for p in a.partitions]
    assert sorted(assigned) == [tp("x", 0), tp("x", 1), tp("x", 2), tp("y", 0), tp("y", 1)]


@pytest.mark.parametrize("name", sorted(KINDS))
def test_no_members_no_assignment(name):
    assert assignor_for(name).assign({"x": 3}, {}) == {}


@pytest.mark.parametrize("name", ["range", "roundrobin"])
def test_stateless_assignors_send_no_user_data(name):
    assignor = assignor_for(name)
    assignor.on_assignment(Assignment([tp("x", 0)]), 3)
    assert assignor.subscription_user_data(["x"], [tp("x", 0)]) is None


def test_java_string_hash_matches_java():
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # two UTF-16 units


def test_topic_partition_hash_matches_kafka():
    # Kafka: 31 * (31 * 1 + partition) + topic.hashCode()
    assert topic_partition_hash(tp("t", 0)) == 31 * 31 + ord("t")
    assert topic_partition_hash(tp("hello", 5)) == 31 * 36 + 99162322


def test_java_string_order_compares_utf16_units():
    assert java_str_key("\U00010000") < java_str_key("\uffff")  # Python's order is the reverse
    assert java_str_key("a") < java_str_key("ab") < java_str_key("b")


def test_hash_order_buckets_then_insertion():
    assert java_hash_order(["c", "a", "b"]) == ["a", "b", "c"]
    assert java_hash_order(["BB", "Aa"]) == ["BB", "Aa"]  # one bucket: insertion order
    assert java_hash_order(["consumer1", "consumer2", "consumer3"]) == [
        "consumer3",
        "consumer2",
        "consumer1",
    ]


def test_hash_order_follows_table_growth():
    """Keys 16 apart share a bucket of 16 but not of 32: the 13th key doubles the table."""
    keys = [chr(0x41 + 16 * i) for i in range(2)] + [chr(0x61 + i) for i in range(10)]
    twelve = java_hash_order(keys)
    assert twelve.index("A") < twelve.index("Q")  # 0x41, 0x51 share bucket 1: insertion order
    thirteen = java_hash_order(["Q", "A", *keys[2:], "z"])
    assert thirteen.index("A") < thirteen.index("Q")  # 32 buckets: 1 before 17


def test_hash_set_first_and_removal():
    s = JavaHashSet(java_string_hash, ["b", "a"])
    assert s.first() == "a" and len(s) == 2 and "b" in s
    s.discard("a")
    assert s.first() == "b"
    s.discard("b")
    with pytest.raises(KeyError):
        s.first()


def test_subscriptions_are_visited_like_kafkas_leader(monkeypatch):
    """The sticky assignors see members in the leader's HashMap order, not insertion order."""
    seen: list[str] = []
    assignor = StickyAssignor()
    original = assignor.member_data

    def spy(subscription):
        seen.append(subscription.topics[0])
        return original(subscription)

    monkeypatch.setattr(assignor, "member_data", spy)
    subs = {m: sub([m]) for m in ("consumer1", "consumer2", "consumer3")}
    assign(assignor, dict.fromkeys(subs, 1), subs)
    assert seen[:3] == ["consumer3", "consumer2", "consumer1"]
