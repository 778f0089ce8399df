"""Kafka's RoundRobinAssignorTest, ported, plus the mixed-subscription example of its javadoc."""

from __future__ import annotations

import pytest
from assignor_testkit import assign, sub, tp, tps

from riverlog.common.assignors import RoundRobinAssignor

T, T1, T2 = "topic", "topic1", "topic2"
C1, C2, C3 = "consumer1", "consumer2", "consumer3"


@pytest.fixture
def assignor() -> RoundRobinAssignor:
    return RoundRobinAssignor()


def test_one_consumer_no_topic(assignor):
    assert assign(assignor, {}, {"consumer": sub([])}) == {"consumer": []}


def test_one_consumer_nonexistent_topic(assignor):
    assert assign(assignor, {}, {"consumer": sub([T])}) == {"consumer": []}


def test_one_consumer_one_topic(assignor):
    assert assign(assignor, {T: 3}, {"consumer": sub([T])}) == {
        "consumer": tps("topic-0, topic-1, topic-2")
    }


def test_only_assigns_partitions_from_subscribed_topics(assignor):
    assert assign(assignor, {T: 3, "other": 3}, {"consumer": sub([T])}) == {
        "consumer": tps("topic-0, topic-1, topic-2")
    }


def test_one_consumer_multiple_topics(assignor):
    assert assign(assignor, {T1: 1, T2: 2}, {"consumer": sub([T1, T2])}) == {
        "consumer": tps("topic1-0, topic2-0, topic2-1")
    }


def test_two_consumers_one_topic_one_partition(assignor):
    assert assign(assignor, {T: 1}, {C1: sub([T]), C2: sub([T])}) == {C1: [tp(T, 0)], C2: []}


def test_two_consumers_one_topic_two_partitions(assignor):
    assert assign(assignor, {T: 2}, {C1: sub([T]), C2: sub([T])}) == {
        C1: [tp(T, 0)],
        C2: [tp(T, 1)],
    }


def test_multiple_consumers_mixed_topics(assignor):
    subs = {C1: sub([T1]), C2: sub([T1, T2]), C3: sub([T1])}
    assert assign(assignor, {T1: 3, T2: 2}, subs) == {
        C1: [tp(T1, 0)],
        C2: tps("topic1-1, topic2-0, topic2-1"),
        C3: [tp(T1, 2)],
    }


def test_two_dynamic_consumers_two_topics_six_partitions(assignor):
    subs = {C1: sub([T1, T2]), C2: sub([T1, T2])}
    assert assign(assignor, {T1: 3, T2: 3}, subs) == {
        C1: tps("topic1-0, topic1-2, topic2-1"),
        C2: tps("topic1-1, topic2-0, topic2-2"),
    }


@pytest.mark.parametrize("other_is_static", [True, False])
def test_static_members_rank_by_instance_id_before_dynamic_ones(assignor, other_is_static):
    subs = {
        "consumer-b": sub([T1, T2], instance="instance1"),
        "consumer-a": sub([T1, T2], instance="instance2" if other_is_static else None),
    }
    assert assign(assignor, {T1: 3, T2: 3}, subs) == {
        "consumer-b": tps("topic1-0, topic1-2, topic2-1"),
        "consumer-a": tps("topic1-1, topic2-0, topic2-2"),
    }


def test_static_member_assignment_persists_across_dynamic_member_churn(assignor):
    subs = {f"consumer{i}": sub([T1, T2], instance=f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = sub([T1, T2])
    expected = {
        C1: tps("topic1-0, topic2-1"),
        C2: tps("topic1-1, topic2-2"),
        C3: [tp(T1, 2)],
        "consumer4": [tp(T2, 0)],
    }
    assert assign(assignor, {T1: 3, T2: 3}, subs) == expected
    del subs["consumer4"]
    subs["consumer5"] = sub([T1, T2])
    expected["consumer5"] = expected.pop("consumer4")
    assert assign(assignor, {T1: 3, T2: 3}, subs) == expected


@pytest.mark.parametrize(
    "members",
    [
        {C1: "instance1", C2: "instance2", C3: "instance3"},
        {"consumer4": "instance1", "consumer5": "instance2", C1: "instance3"},
    ],
)
def test_static_member_assignment_persists_after_member_id_changes(assignor, members):
    subs = {m: sub([T1, T2], instance=i) for m, i in members.items()}
    assignment = assign(assignor, {T1: 3, T2: 3}, subs)
    by_instance = {members[m]: parts for m, parts in assignment.items()}
    assert by_instance == {f"instance{i + 1}": [tp(T1, i), tp(T2, i)] for i in range(3)}


def test_javadoc_example_with_different_subscriptions(assignor):
    subs = {"C0": sub(["t0"]), "C1": sub(["t0", "t1"]), "C2": sub(["t0", "t1", "t2"])}
    assert assign(assignor, {"t0": 1, "t1": 2, "t2": 3}, subs) == {
        "C0": [tp("t0", 0)],
        "C1": [tp("t1", 0)],
        "C2": tps("t1-1, t2-0, t2-1, t2-2"),
    }
