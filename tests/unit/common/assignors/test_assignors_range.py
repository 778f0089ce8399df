"""Kafka's RangeAssignorTest and AbstractPartitionAssignorTest (member ordering), ported. The
rack-aware tests contribute their non-rack expected assignments (`verifyNonRackAwareAssignment`),
which Kafka checks with every rack layout that disables rack-aware assignment."""

from __future__ import annotations

import random

import pytest
from assignor_testkit import assign, sub, tp, tps

from riverlog.common.assignors import RangeAssignor, Subscription
from riverlog.common.assignors.abstract import sorted_members

T1, T2 = "topic1", "topic2"
C1, C2, C3 = "consumer1", "consumer2", "consumer3"


@pytest.fixture
def assignor() -> RangeAssignor:
    return RangeAssignor()


def test_one_consumer_no_topic(assignor):
    assert assign(assignor, {}, {C1: sub([])}) == {C1: []}


def test_one_consumer_nonexistent_topic(assignor):
    assert assign(assignor, {}, {C1: sub([T1])}) == {C1: []}


def test_one_consumer_one_topic(assignor):
    assert assign(assignor, {T1: 3}, {C1: sub([T1])}) == {C1: tps("topic1-0, topic1-1, topic1-2")}


def test_only_assigns_partitions_from_subscribed_topics(assignor):
    assignment = assign(assignor, {T1: 3, "other": 3}, {C1: sub([T1])})
    assert assignment == {C1: tps("topic1-0, topic1-1, topic1-2")}


def test_one_consumer_multiple_topics(assignor):
    assignment = assign(assignor, {T1: 1, T2: 2}, {C1: sub([T1, T2])})
    assert assignment == {C1: tps("topic1-0, topic2-0, topic2-1")}


def test_two_consumers_one_topic_one_partition(assignor):
    assert assign(assignor, {T1: 1}, {C1: sub([T1]), C2: sub([T1])}) == {C1: [tp(T1, 0)], C2: []}


def test_two_consumers_one_topic_two_partitions(assignor):
    assignment = assign(assignor, {T1: 2}, {C1: sub([T1]), C2: sub([T1])})
    assert assignment == {C1: [tp(T1, 0)], C2: [tp(T1, 1)]}


def test_multiple_consumers_mixed_topics(assignor):
    subs = {C1: sub([T1]), C2: sub([T1, T2]), C3: sub([T1])}
    assert assign(assignor, {T1: 3, T2: 2}, subs) == {
        C1: [tp(T1, 0)],
        C2: tps("topic1-1, topic2-0, topic2-1"),
        C3: [tp(T1, 2)],
    }


def test_two_consumers_two_topics_six_partitions(assignor):
    subs = {C1: sub([T1, T2]), C2: sub([T1, T2])}
    assert assign(assignor, {T1: 3, T2: 3}, subs) == {
        C1: tps("topic1-0, topic1-1, topic2-0, topic2-1"),
        C2: tps("topic1-2, topic2-2"),
    }


@pytest.mark.parametrize("high_is_static", [True, False])
def test_static_members_rank_by_instance_id_before_dynamic_ones(assignor, high_is_static):
    """consumer-a sorts first by member id, but consumer-b's instance id (or being static at
    all) puts it first."""
    subs = {
        "consumer-b": sub([T1, T2], instance="instance1"),
        "consumer-a": sub([T1, T2], instance="instance2" if high_is_static else None),
    }
    assert assign(assignor, {T1: 3, T2: 3}, subs) == {
        "consumer-b": tps("topic1-0, topic1-1, topic2-0, topic2-1"),
        "consumer-a": tps("topic1-2, topic2-2"),
    }


def test_static_member_assignment_persists_across_dynamic_member_churn(assignor):
    subs = {f"consumer{i}": sub([T1, T2], instance=f"instance{i}") for i in (1, 2, 3)}
    subs["consumer4"] = sub([T1, T2])
    expected = {
        C1: tps("topic1-0, topic1-1, topic2-0"),
        C2: tps("topic1-2, topic2-1"),
        C3: tps("topic1-3, topic2-2"),
        "consumer4": tps("topic1-4, topic2-3"),
    }
    assert assign(assignor, {T1: 5, T2: 4}, subs) == expected

    del subs["consumer4"]
    subs["consumer5"] = sub([T1, T2])
    expected["consumer5"] = expected.pop("consumer4")
    assert assign(assignor, {T1: 5, T2: 4}, subs) == expected


def _by_instance(assignor, subs: dict[str, Subscription]) -> dict[str, list]:
    assignment = assign(assignor, {T1: 5, T2: 5}, subs)
    return {s.group_instance_id: assignment[m] for m, s in subs.items()}


def test_static_member_assignment_persists_after_member_id_changes(assignor):
    subs = {f"consumer{i}": sub([T1, T2], instance=f"instance{i}") for i in (1, 2, 3)}
    before = _by_instance(assignor, subs)
    assert before == {
        "instance1": tps("topic1-0, topic1-1, topic2-0, topic2-1"),
        "instance2": tps("topic1-2, topic1-3, topic2-2, topic2-3"),
        "instance3": tps("topic1-4, topic2-4"),
    }
    subs["consumer4"] = subs.pop(C3)
    subs["consumer5"] = subs.pop(C2)
    assert _by_instance(assignor, subs) == before


ALL3 = ["t1", "t2", "t3"]


@pytest.mark.parametrize(
    ("partitions", "topics_per_member", "expected"),
    [
        (
            {"t1": 6, "t2": 7, "t3": 2},
            [ALL3, ALL3, ALL3],
            [
                "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0",
                "t1-2, t1-3, t2-3, t2-4, t3-1",
                "t1-4, t1-5, t2-5, t2-6",
            ],
        ),
        (
            {"t1": 6, "t2": 7, "t3": 2},
            [ALL3, ALL3, ["t1", "t3"]],
            [
                "t1-0, t1-1, t2-0, t2-1, t2-2, t2-3, t3-0",
                "t1-2, t1-3, t2-4, t2-5, t2-6, t3-1",
                "t1-4, t1-5",
            ],
        ),
        (
            {"t1": 5, "t2": 5, "t3": 5},
            [ALL3, ALL3, ALL3],
            [
                "t1-0, t1-1, t2-0, t2-1, t3-0, t3-1",
                "t1-2, t1-3, t2-2, t2-3, t3-2, t3-3",
                "t1-4, t2-4, t3-4",
            ],
        ),
        (
            {"t1": 5, "t2": 5, "t3": 5},
            [ALL3, ALL3, ["t1", "t3"]],
            [
                "t1-0, t1-1, t2-0, t2-1, t2-2, t3-0, t3-1",
                "t1-2, t1-3, t2-3, t2-4, t3-2, t3-3",
                "t1-4, t3-4",
            ],
        ),
        (
            {"t1": 6, "t2": 6, "t3": 2, "t4": 2},
            [["t1", "t2"], ["t1", "t2"], ["t3", "t4"], ["t3", "t4"]],
            [
                "t1-0, t1-1, t1-2, t2-0, t2-1, t2-2",
                "t1-3, t1-4, t1-5, t2-3, t2-4, t2-5",
                "t3-0, t4-0",
                "t3-1, t4-1",
            ],
        ),
        (
            {"t1": 6, "t2": 6, "t3": 2, "t4": 2},
            [["t1", "t2", "t3", "t4"]] * 4,
            [
                "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0",
                "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1",
                "t1-4, t2-4",
                "t1-5, t2-5",
            ],
        ),
        (
            {"t1": 6, "t2": 6, "t3": 2, "t4": 2, "t5": 4, "t6": 4},
            [[f"t{i}" for i in range(1, 10)]] * 3,
            [
                "t1-0, t1-1, t2-0, t2-1, t3-0, t4-0, t5-0, t5-1, t6-0, t6-1",
                "t1-2, t1-3, t2-2, t2-3, t3-1, t4-1, t5-2, t6-2",
                "t1-4, t1-5, t2-4, t2-5, t5-3, t6-3",
            ],
        ),
    ],
    ids=[
        "uniform",
        "non-equal",
        "uniform-partitions",
        "uniform-partitions-non-equal",
        "co-partitioned",
        "co-partitioned-all-topics",
        "co-partitioned-same-subscription",
    ],
)
def test_kafka_non_rack_aware_assignments(assignor, partitions, topics_per_member, expected):
    subs = {f"consumer{i}": sub(topics) for i, topics in enumerate(topics_per_member)}
    assignment = assign(assignor, partitions, subs)
    assert [", ".join(map(str, assignment[f"consumer{i}"])) for i in range(len(subs))] == expected


def test_member_order_without_instance_ids():
    subs = {m: sub([]) for m in ("c", "a", "b")}
    assert sorted_members(subs) == ["a", "b", "c"]


def test_member_order_with_instance_ids():
    subs = {"a": sub([], instance="y"), "b": sub([], instance="z"), "c": sub([], instance="x")}
    assert sorted_members(subs) == ["c", "a", "b"]


def test_member_order_with_some_instance_ids():
    subs = {"a": sub([]), "b": sub([], instance="y"), "c": sub([], instance="x")}
    assert sorted_members(subs) == ["c", "b", "a"]


def test_member_order_static_first_then_dynamic_many():
    rng = random.Random(3)
    ids = [str(i + 100) for i in range(100)]
    static = {m for m in ids if rng.random() < 0.5}
    shuffled = rng.sample(ids, len(ids))
    subs = {m: sub([], instance=m if m in static else None) for m in shuffled}
    assert sorted_members(subs) == sorted(static) + sorted(set(ids) - static)
