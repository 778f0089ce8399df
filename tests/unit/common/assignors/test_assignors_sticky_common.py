"""Kafka's AbstractStickyAssignorTest, ported: every scenario runs against both "sticky" and
"cooperative-sticky" (for the cooperative one, `verify` also plays the follow-up rebalances).
Rack-aware variants are left out: `assign()` carries no replica racks. Kafka's 1M-partition
performance tests are scaled down; random ones use a fixed seed."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from assignor_testkit import (
    DEFAULT_GENERATION,
    assign,
    consumer_name,
    is_fully_balanced,
    new_sticky,
    sub,
    sub_v0,
    sub_v1,
    sub_v2,
    topic_name,
    tp,
    tps,
    verify,
)

from riverlog.common.assignors import Subscription
from riverlog.common.assignors.sticky import AbstractStickyAssignor

T, T1, T2, T3 = "topic", "topic1", "topic2", "topic3"
C1, C2, C3, C4 = "consumer1", "consumer2", "consumer3", "consumer4"
GEN = 1


@pytest.fixture(params=["sticky", "cooperative-sticky"])
def assignor(request: pytest.FixtureRequest) -> AbstractStickyAssignor:
    return new_sticky(request.param)


def test_member_data_is_read_from_every_protocol_version(assignor):
    owned = [tp(T1, 0), tp(T2, 1)]
    for build in (sub_v0, sub_v1, sub_v2):
        subscription = build(assignor, [T], owned, GEN)
        if subscription is None:  # cooperative-sticky needs ConsumerProtocol v1+
            continue
        data = assignor.member_data(subscription)
        assert data.partitions == owned
        assert data.generation == GEN


def test_one_consumer_no_topic(assignor):
    subs = {"consumer": sub([])}
    assignment = assign(assignor, {}, subs)
    assert assignment == {"consumer": []}
    assert assignor.partitions_transferring_ownership == {}


def test_one_consumer_nonexistent_topic(assignor):
    subs = {"consumer": sub([T])}
    assert assign(assignor, {T: 0}, subs) == {"consumer": []}
    assert assignor.partitions_transferring_ownership == {}


def test_one_consumer_one_topic(assignor):
    subs = {"consumer": sub([T])}
    assignment = assign(assignor, {T: 3}, subs)
    assert assignment == {"consumer": [tp(T, 0), tp(T, 1), tp(T, 2)]}
    assert assignor.partitions_transferring_ownership == {}


def test_only_assigns_partitions_from_subscribed_topics(assignor):
    owned = [tp(T, 0), tp(T, 1), tp("other", 0), tp("other", 1)]
    subs = {"consumer": sub_v2(assignor, [T], owned, GEN)}
    assignment = assign(assignor, {T: 2, "other": 3}, subs)
    assert assignment == {"consumer": [tp(T, 0), tp(T, 1)]}
    assert assignor.partitions_transferring_ownership == {}


def test_one_consumer_multiple_topics(assignor):
    subs = {"consumer": sub([T1, T2])}
    assignment = assign(assignor, {T1: 1, T2: 2}, subs)
    assert assignment == {"consumer": [tp(T1, 0), tp(T2, 0), tp(T2, 1)]}


def test_two_consumers_one_topic_one_partition(assignor):
    ppt = {T: 1}
    subs = {C1: sub([T]), C2: sub([T])}
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert assignment == {C1: [tp(T, 0)], C2: []}
    assert assignor.partitions_transferring_ownership == {}


def test_two_consumers_one_topic_two_partitions(assignor):
    subs = {C1: sub([T]), C2: sub([T])}
    assert assign(assignor, {T: 2}, subs) == {C1: [tp(T, 0)], C2: [tp(T, 1)]}
    assert assignor.partitions_transferring_ownership == {}


def test_multiple_consumers_mixed_topic_subscriptions(assignor):
    ppt = {T1: 3, T2: 2}
    subs = {C1: sub([T1]), C2: sub([T1, T2]), C3: sub([T1])}
    assignment = assign(assignor, ppt, subs)
    assert assignment == {C1: [tp(T1, 0), tp(T1, 2)], C2: [tp(T2, 0), tp(T2, 1)], C3: [tp(T1, 1)]}
    assert assignor.partitions_transferring_ownership is None  # the general algorithm ran
    assert is_fully_balanced(verify(assignor, ppt, subs, assignment))


def test_two_consumers_two_topics_six_partitions(assignor):
    subs = {C1: sub([T1, T2]), C2: sub([T1, T2])}
    assignment = assign(assignor, {T1: 3, T2: 3}, subs)
    assert assignment == {
        C1: [tp(T1, 0), tp(T1, 2), tp(T2, 1)],
        C2: [tp(T1, 1), tp(T2, 0), tp(T2, 2)],
    }


def test_consumer_owning_min_quota_expected_max_quota(assignor):
    topics = [T1, T2]
    subs = {
        C1: sub_v2(assignor, topics, [tp(T1, 0), tp(T2, 1)], GEN),
        C2: sub_v2(assignor, topics, [tp(T1, 1), tp(T2, 2)], GEN),
    }
    assignment = assign(assignor, {T1: 2, T2: 3}, subs)
    assert assignment == {C1: [tp(T1, 0), tp(T2, 0), tp(T2, 1)], C2: [tp(T1, 1), tp(T2, 2)]}
    assert assignor.partitions_transferring_ownership == {}


def test_max_quota_owners_beyond_expected_count_give_one_up(assignor):
    """Both consumer1 and consumer2 own maxQuota but only one may keep it: Kafka's leader
    visits its HashMap in the order consumer3, consumer2, consumer1, so consumer2 keeps both."""
    ppt = {T1: 2, T2: 2}
    topics = [T1, T2]
    subs = {
        C1: sub_v2(assignor, topics, [tp(T1, 0), tp(T2, 0)], GEN),
        C2: sub_v2(assignor, topics, [tp(T1, 1), tp(T2, 1)], GEN),
        C3: sub_v2(assignor, topics, [], GEN),
    }
    assignment = assign(assignor, ppt, subs)
    assert assignor.partitions_transferring_ownership == {tp(T2, 0): C3}
    assignment = verify(assignor, ppt, subs, assignment)
    assert assignment == {C1: [tp(T1, 0)], C2: [tp(T1, 1), tp(T2, 1)], C3: [tp(T2, 0)]}


def test_all_consumers_are_under_min_quota(assignor):
    topics = [T1, T2]
    subs = {
        C1: sub_v2(assignor, topics, [tp(T1, 0)], GEN),
        C2: sub_v2(assignor, topics, [tp(T1, 1)], GEN),
        C3: sub_v2(assignor, topics, [], GEN),
    }
    assignment = assign(assignor, {T1: 2, T2: 3}, subs)
    assert assignor.partitions_transferring_ownership == {}
    assert assignment == {
        C1: [tp(T1, 0), tp(T2, 1)],
        C2: [tp(T1, 1), tp(T2, 2)],
        C3: [tp(T2, 0)],
    }


def test_add_remove_consumer_one_topic(assignor):
    ppt = {T: 3}
    subs: dict[str, Subscription] = {C1: sub([T])}
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert assignment == {C1: [tp(T, 0), tp(T, 1), tp(T, 2)]}

    subs[C1] = sub_v2(assignor, [T], assignment[C1], GEN)
    subs[C2] = sub_v2(assignor, [T], [], GEN)
    assignment = assign(assignor, ppt, subs)
    assert assignor.partitions_transferring_ownership == {tp(T, 2): C2}
    assignment = verify(assignor, ppt, subs, assignment)
    assert assignment == {C1: [tp(T, 0), tp(T, 1)], C2: [tp(T, 2)]}

    del subs[C1]
    subs[C2] = sub_v2(assignor, [T], assignment[C2], GEN)
    assignment = assign(assignor, ppt, subs)
    assert assignment == {C2: [tp(T, 0), tp(T, 1), tp(T, 2)]}
    assert assignor.partitions_transferring_ownership == {}


def test_add_remove_two_consumers_two_topics(assignor):
    ppt = {T1: 3, T2: 4}
    topics = [T1, T2]
    subs = {C1: sub(topics), C2: sub(topics)}
    assignment = assign(assignor, ppt, subs)
    assert assignment == {
        C1: [tp(T1, 0), tp(T1, 2), tp(T2, 1), tp(T2, 3)],
        C2: [tp(T1, 1), tp(T2, 0), tp(T2, 2)],
    }

    subs[C1] = sub_v2(assignor, topics, assignment[C1], GEN)
    subs[C2] = sub_v2(assignor, topics, assignment[C2], GEN)
    subs[C3] = sub_v2(assignor, topics, [], GEN)
    subs[C4] = sub_v2(assignor, topics, [], GEN)
    assignment = assign(assignor, ppt, subs)
    assert assignor.partitions_transferring_ownership == {
        tp(T1, 2): C3,
        tp(T2, 3): C3,
        tp(T2, 2): C4,
    }
    assignment = verify(assignor, ppt, subs, assignment)
    assert assignment == {
        C1: [tp(T1, 0), tp(T2, 1)],
        C2: [tp(T1, 1), tp(T2, 0)],
        C3: [tp(T1, 2), tp(T2, 3)],
        C4: [tp(T2, 2)],
    }

    del subs[C1], subs[C2]
    subs[C3] = sub_v2(assignor, topics, assignment[C3], GEN)
    subs[C4] = sub_v2(assignor, topics, assignment[C4], GEN)
    assignment = assign(assignor, ppt, subs)
    assert assignment == {
        C3: [tp(T1, 0), tp(T1, 2), tp(T2, 1), tp(T2, 3)],
        C4: [tp(T1, 1), tp(T2, 0), tp(T2, 2)],
    }
    assert assignor.partitions_transferring_ownership == {}


def test_topic_balance_after_reassignment(assignor):
    """Kafka 3.8 (KAFKA-16277): kept partitions are chosen by partition number first, so each
    member keeps an even share of every topic as the group grows and shrinks."""
    ppt = {T1: 12, T2: 12}
    topics = [T1, T2]

    def per_topic(assignment):
        return {
            m: sorted(Counter(p.topic for p in parts).values()) for m, parts in assignment.items()
        }

    subs = {C1: sub(topics)}
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert per_topic(assignment) == {C1: [12, 12]}
    assert assignor.partitions_transferring_ownership == {}

    subs[C1] = sub_v2(assignor, topics, assignment[C1], GEN)
    subs[C2] = sub_v2(assignor, topics, [], GEN)
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert per_topic(assignment) == {C1: [6, 6], C2: [6, 6]}

    for member in (C1, C2):
        subs[member] = sub_v2(assignor, topics, assignment[member], GEN)
    subs[C3] = sub_v2(assignor, topics, [], GEN)
    subs[C4] = sub_v2(assignor, topics, [], GEN)
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert per_topic(assignment) == {member: [3, 3] for member in (C1, C2, C3, C4)}

    del subs[C1], subs[C2]
    for member in (C3, C4):
        subs[member] = sub_v2(assignor, topics, assignment[member], GEN)
    assignment = assign(assignor, ppt, subs)
    assert assignor.partitions_transferring_ownership == {}
    assignment = verify(assignor, ppt, subs, assignment)
    assert per_topic(assignment) == {C3: [6, 6], C4: [6, 6]}


def test_poor_round_robin_scenario_is_balanced(assignor):
    ppt = {f"topic{i}": i % 2 + 1 for i in range(1, 6)}
    everything = ["topic1", "topic2", "topic3", "topic4", "topic5"]
    odd = ["topic1", "topic3", "topic5"]
    subs = {C1: sub(everything), C2: sub(odd), C3: sub(odd), C4: sub(everything)}
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert all(len(parts) == 2 for parts in assignment.values())  # round robin leaves C3 empty


def test_add_remove_topic_two_consumers(assignor):
    ppt = {T: 3}
    subs = {C1: sub([T]), C2: sub([T])}
    first = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert sorted(len(p) for p in first.values()) == [1, 2]

    ppt[T2] = 3
    subs[C1] = sub_v2(assignor, [T, T2], first[C1], GEN)
    subs[C2] = sub_v2(assignor, [T, T2], first[C2], GEN)
    second = assign(assignor, ppt, subs)
    assert assignor.partitions_transferring_ownership == {}
    second = verify(assignor, ppt, subs, second)
    assert [len(second[C1]), len(second[C2])] == [3, 3]
    assert set(first[C1]) <= set(second[C1]) and set(first[C2]) <= set(second[C2])

    del ppt[T]
    subs[C1] = sub_v2(assignor, [T2], second[C1], GEN)
    subs[C2] = sub_v2(assignor, [T2], second[C2], GEN)
    third = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert sorted(len(p) for p in third.values()) == [1, 2]
    assert set(third[C1]) <= set(second[C1]) and set(third[C2]) <= set(second[C2])


def test_reassignment_after_one_consumer_leaves(assignor):
    ppt = {topic_name(i, 20): i for i in range(1, 20)}
    subs = {
        consumer_name(i, 20): sub([topic_name(j, 20) for j in range(1, i + 1)])
        for i in range(1, 20)
    }
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    for member in list(subs):
        subs[member] = sub_v2(assignor, subs[member].topics, assignment[member], GEN)
    del subs["c10"]  # Kafka's test removes "consumer10", a name its group does not have
    verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert assignor.is_sticky()


def test_reassignment_after_one_consumer_added(assignor):
    ppt = {"topic": 20}
    subs = {consumer_name(i, 10): sub(["topic"]) for i in range(1, 10)}
    verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert assignor.partitions_transferring_ownership == {}
    subs[consumer_name(10, 10)] = sub(["topic"])
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert assignor.partitions_transferring_ownership == {}
    assert is_fully_balanced(assignment)


def test_same_subscriptions_after_a_member_leaves(assignor):
    ppt = {topic_name(i, 15): i for i in range(1, 15)}
    subs = {consumer_name(i, 9): sub(list(ppt)) for i in range(1, 9)}
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    for member in list(subs):
        subs[member] = sub_v2(assignor, subs[member].topics, assignment[member], GEN)
    del subs[consumer_name(5, 9)]
    after = assign(assignor, ppt, subs)
    assert assignor.partitions_transferring_ownership == {}  # only the leaver's were free
    after = verify(assignor, ppt, subs, after)
    assert all(set(assignment[m]) <= set(after[m]) for m in after)


@pytest.mark.parametrize("uniform", [True, False])
def test_large_group_second_generation(assignor, uniform):
    """Kafka's testLargeAssignmentAndGroupWith{Uniform,NonEqual}Subscription, scaled down
    from 500 topics x 2000 partitions x 2000 members."""
    topics = [topic_name(i, 20) for i in range(20)]
    ppt = dict.fromkeys(topics, 50)
    members = [consumer_name(i, 200) for i in range(200)]
    subs = {m: sub(topics) for m in members}
    if not uniform:
        subs[members[-1]] = sub(topics[:1])
    assignment = assign(assignor, ppt, subs)
    for m in members[1:]:
        subs[m] = sub_v2(assignor, subs[m].topics, assignment[m], GEN)
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert sum(map(len, assignment.values())) == 1000


def test_non_equal_subscription_halves(assignor):
    """Kafka's testAssignmentAndGroupWithNonEqualSubscriptionNotTimeout, scaled down."""
    topics = [topic_name(i, 40) for i in range(40)]
    ppt = dict.fromkeys(topics, 20)
    members = [consumer_name(i, 20) for i in range(20)]
    halves = {m: topics[:20] if i % 4 == 0 else topics[20:] for i, m in enumerate(members)}
    subs = {m: sub(halves[m]) for m in members}
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    for m in members[1:]:
        subs[m] = sub_v2(assignor, halves[m], assignment[m], GEN)
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert sum(map(len, assignment.values())) == 800


def test_same_partition_claimed_across_three_generations(assignor):
    ppt = {T: 6, T1: 1}
    for g1, g2, g3 in [(1, 2, 3), (1, 3, 2), (2, 1, 3), (2, 3, 1), (3, 1, 2), (3, 2, 1)]:
        subs = {
            C1: sub_v2(assignor, [T], [tp(T, 0), tp(T, 2)], g1),
            C2: sub_v2(assignor, [T], [tp(T, 1), tp(T, 2), tp(T, 3)], g2),
            C3: sub_v2(assignor, [T], [tp(T, 2), tp(T, 4), tp(T, 5)], g3),
            C4: sub_v2(assignor, [T1], [tp(T1, 0)], 2),
        }
        assignment = assign(assignor, ppt, subs)
        everything = [p for parts in assignment.values() for p in parts]
        assert len(everything) == len(set(everything))
        assert all(1 <= len(parts) <= 2 for parts in assignment.values())


def test_many_consumers_leaving_with_random_subscriptions(assignor):
    rng = random.Random(7)
    ppt = {topic_name(i, 40): rng.randint(1, 10) for i in range(40)}
    names = list(ppt)
    subs = {
        consumer_name(i, 100): sub([rng.choice(names) for _ in range(rng.randrange(20))])
        for i in range(100)
    }
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    for m in list(subs)[1:]:
        subs[m] = sub_v2(assignor, subs[m].topics, assignment[m], GEN)
    for _ in range(25):
        subs.pop(consumer_name(rng.randrange(100), 100), None)
    verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert assignor.is_sticky()


def test_new_subscription(assignor):
    ppt = {topic_name(i, 5): 1 for i in range(1, 5)}
    subs = {
        consumer_name(i, 3): sub([topic_name(j, 5) for j in range(i, 3 * i - 1)]) for i in range(3)
    }
    verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    subs["c0"] = sub([topic_name(1, 5)])
    verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert assignor.is_sticky()


def test_move_existing_assignments(assignor):
    ppt = {f"topic{i}": 1 for i in range(1, 7)}
    subs = {
        C1: sub_v2(assignor, ["topic1", "topic2"], [tp("topic1", 0)], GEN),
        C2: sub_v2(
            assignor,
            ["topic1", "topic2", "topic3", "topic4"],
            [tp("topic2", 0), tp("topic3", 0)],
            GEN,
        ),
        C3: sub_v2(
            assignor,
            ["topic2", "topic3", "topic4", "topic5", "topic6"],
            [tp("topic4", 0), tp("topic5", 0), tp("topic6", 0)],
            GEN,
        ),
    }
    assignment = assign(assignor, ppt, subs)
    assert assignor.partitions_transferring_ownership is None
    verify(assignor, ppt, subs, assignment)


def test_stickiness_when_the_leader_leaves(assignor):
    ppt = {T1: 3}
    subs = {c: sub([T1]) for c in (C1, C2, C3, C4)}
    first = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert all(len(parts) <= 1 for parts in first.values())

    del subs[C1]
    for c in (C2, C3, C4):
        subs[c] = sub_v2(assignor, [T1], first[c], GEN)
    second = assign(assignor, ppt, subs)
    assert assignor.partitions_transferring_ownership == {}
    second = verify(assignor, ppt, subs, second)
    for c, parts in second.items():
        assert len(parts) == 1
        assert set(first[c]) <= set(parts), f"stickiness not honoured for {c}"


def test_assignment_updated_for_deleted_topic(assignor):
    subs = {"consumer": sub([T1, T2, T3])}
    assignment = assign(assignor, {T1: 1, T3: 100}, subs)
    assert assignor.partitions_transferring_ownership == {}
    assert len(assignment["consumer"]) == 101


def test_no_exception_when_only_subscribed_topic_deleted(assignor):
    subs = {"consumer": sub([T])}
    assignment = assign(assignor, {T: 3}, subs)
    subs["consumer"] = sub_v2(assignor, [T], assignment["consumer"], GEN)
    assert assign(assignor, {}, subs) == {"consumer": []}
    assert assignor.partitions_transferring_ownership == {}


def test_reassignment_with_random_subscriptions_and_changes(assignor):
    rng = random.Random(11)
    for _ in range(4):
        topics = [topic_name(i, 20) for i in range(rng.randrange(10, 20))]
        ppt = {t: i + 1 for i, t in enumerate(topics)}
        count = rng.randrange(20, 40)

        def random_sublist(topics: list[str] = topics) -> list[str]:
            kept = list(topics)
            for _ in range(rng.randrange(len(topics))):
                kept.pop(rng.randrange(len(kept)))
            return sorted(kept)

        subs = {consumer_name(i, 40): sub(random_sublist()) for i in range(count)}
        fresh = new_sticky(assignor.name)
        assignment = verify(fresh, ppt, subs, assign(fresh, ppt, subs))
        subs = {
            consumer_name(i, 40): sub_v2(
                fresh, random_sublist(), assignment[consumer_name(i, 40)], GEN
            )
            for i in range(count)
        }
        verify(fresh, ppt, subs, assign(fresh, ppt, subs))
        assert fresh.is_sticky()


def test_all_consumers_reach_expected_quota_and_are_considered_filled(assignor):
    subs = {
        C1: sub_v2(assignor, [T], [tp(T, 0), tp(T, 1)], GEN),
        C2: sub_v2(assignor, [T], [tp(T, 2)], GEN),
        C3: sub_v2(assignor, [T], [], GEN),
    }
    assignment = assign(assignor, {T: 4}, subs)
    assert assignment == {C1: [tp(T, 0), tp(T, 1)], C2: [tp(T, 2)], C3: [tp(T, 3)]}
    assert assignor.partitions_transferring_ownership == {}


@pytest.mark.parametrize("stale_generation", [9, DEFAULT_GENERATION])
def test_claims_of_an_older_or_unknown_generation_lose(assignor, stale_generation):
    ppt = {T: 3, T2: 3}
    claimed = [tp(T, 0), tp(T, 2), tp(T2, 1)]
    subs = {
        C1: sub_v2(assignor, [T, T2], claimed, 10),
        C2: sub_v2(assignor, [T, T2], claimed, stale_generation),
    }
    assignment = assign(assignor, ppt, subs)
    assert set(assignment[C1]) == set(claimed)
    assert set(assignment[C2]) == {tp(T, 1), tp(T2, 0), tp(T2, 2)}
    assert assignor.partitions_transferring_ownership == {}


def test_partition_claimed_twice_in_one_generation_is_transferring(assignor):
    ppt = {T: 3}
    subs = {
        C1: sub_v2(assignor, [T], [tp(T, 0), tp(T, 1)], GEN),
        C2: sub_v2(assignor, [T], [tp(T, 0), tp(T, 2)], GEN),
        C3: sub_v2(assignor, [T], [], GEN),
    }
    assignment = assign(assignor, ppt, subs)
    assert assignor.partitions_transferring_ownership == {tp(T, 0): C3}
    assignment = verify(assignor, ppt, subs, assignment)
    assert assignment == {C1: [tp(T, 1)], C2: [tp(T, 2)], C3: [tp(T, 0)]}


def test_partitions_go_to_the_highest_generation(assignor):
    ppt = {T: 3, T2: 3, T3: 3}
    topics = [T, T2, T3]
    subs = {
        C1: sub_v2(assignor, topics, [tp(T, 0), tp(T2, 0), tp(T3, 0)], 10),
        C2: sub_v2(assignor, topics, [tp(T, 1), tp(T2, 1), tp(T3, 1)], 9),
        C3: sub_v2(assignor, topics, [tp(T2, 1), tp(T3, 0), tp(T3, 2)], 8),
    }
    assignment = assign(assignor, ppt, subs)
    assert {m: set(p) for m, p in assignment.items()} == {
        C1: {tp(T, 0), tp(T2, 0), tp(T3, 0)},
        C2: {tp(T, 1), tp(T2, 1), tp(T3, 1)},
        C3: {tp(T, 2), tp(T2, 2), tp(T3, 2)},
    }
    assert assignor.partitions_transferring_ownership == {}


def test_no_reassignment_on_current_members(assignor):
    ppt = {T: 3, T1: 3, T2: 3, T3: 3}
    topics = [T, T2, T3, T1]
    subs = {
        C1: sub_v2(assignor, topics, [], DEFAULT_GENERATION),
        C2: sub_v2(assignor, topics, [tp(T, 0), tp(T2, 0), tp(T1, 0)], 9),
        C3: sub_v2(assignor, topics, [tp(T3, 2), tp(T2, 2), tp(T1, 1)], 8),
        C4: sub_v2(assignor, topics, [tp(T3, 1), tp(T, 1), tp(T, 2)], 7),
    }
    assignment = assign(assignor, ppt, subs)
    assert set(assignment[C1]) == {tp(T1, 2), tp(T2, 1), tp(T3, 0)}
    assert assignor.partitions_transferring_ownership == {}


def test_claims_from_several_generations(assignor):
    ppt = {T: 3, T2: 3}
    subs = {
        C1: sub_v2(assignor, [T, T2], [tp(T, 0), tp(T2, 1), tp(T, 1)], 10),
        C2: sub_v2(assignor, [T, T2], [tp(T, 0), tp(T2, 1), tp(T2, 2)], 8),
    }
    assignment = assign(assignor, ppt, subs)
    assert set(assignment[C1]) == {tp(T, 0), tp(T2, 1), tp(T, 1)}
    assert set(assignment[C2]) == {tp(T, 2), tp(T2, 2), tp(T2, 0)}
    assert assignor.partitions_transferring_ownership == {}


ALL3 = ["t1", "t2", "t3"]
RACK_TEST_TOPICS = {"t1": 6, "t2": 7, "t3": 2}


def _rack_test_round(assignor, topics_per_member, owned):
    """Kafka's `verifyRackAssignment` without racks: members consumer0..N, owned partitions
    as strings, generation unknown; returns each member's partitions as a sorted string."""
    subs = {
        f"consumer{i}": sub(t, tps(o))
        for i, (t, o) in enumerate(zip(topics_per_member, owned, strict=True))
    }
    result = assign(assignor, RACK_TEST_TOPICS, subs)
    return [", ".join(sorted(map(str, result[f"consumer{i}"]))) for i in range(len(subs))]


def test_uniform_subscription_matches_kafka_and_stays_put(assignor):
    expected = [
        "t1-0, t1-3, t2-0, t2-3, t2-6",
        "t1-1, t1-4, t2-1, t2-4, t3-0",
        "t1-2, t1-5, t2-2, t2-5, t3-1",
    ]
    assert _rack_test_round(assignor, [ALL3] * 3, ["", "", ""]) == expected
    assert _rack_test_round(assignor, [ALL3] * 3, expected) == expected


def test_non_equal_subscription_matches_kafka(assignor):
    expected = [
        "t1-5, t2-0, t2-2, t2-4, t2-6",
        "t1-3, t2-1, t2-3, t2-5, t3-0",
        "t1-0, t1-1, t1-2, t1-4, t3-1",
    ]
    members = [ALL3, ALL3, ["t1", "t3"]]
    assert _rack_test_round(assignor, members, ["", "", ""]) == expected
    assert _rack_test_round(assignor, members, expected) == expected
