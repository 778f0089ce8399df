"""Kafka's CooperativeStickyAssignorTest, ported, plus the cooperative rule itself: a partition
that changes owner is first only revoked, and assigned in the follow-up rebalance."""

from __future__ import annotations

import pytest
from assignor_testkit import (
    DEFAULT_GENERATION,
    assign,
    is_fully_balanced,
    sub,
    sub_v1,
    sub_v2,
    tp,
    tps,
    verify,
)

from riverlog.common.assignors import Assignment, CooperativeStickyAssignor, RebalanceProtocol
from riverlog.common.assignors.sticky.userdata import encode_cooperative_user_data

T, T1, T2 = "topic", "topic1", "topic2"
C1, C2, C3 = "consumer1", "consumer2", "consumer3"
GEN = 1


@pytest.fixture
def assignor() -> CooperativeStickyAssignor:
    return CooperativeStickyAssignor()


def test_supports_cooperative_first_then_eager(assignor):
    assert assignor.supported_protocols == (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)


def test_encode_and_decode_generation(assignor):
    data = assignor.member_data(sub([T], user_data=assignor.subscription_user_data([T], [])))
    assert data.generation == DEFAULT_GENERATION  # present, and -1

    assignor.on_assignment(Assignment([]), 10)
    data = assignor.member_data(sub([T], user_data=assignor.subscription_user_data([T], [])))
    assert data.generation == 10


def test_no_user_data_means_unknown_generation(assignor):
    assert assignor.member_data(sub([T])).generation is None


def test_unreadable_user_data_means_generation_minus_one(assignor):
    assert assignor.member_data(sub([T], user_data=b"\x01")).generation == DEFAULT_GENERATION


@pytest.mark.parametrize(("count", "expected_c1"), [(3, "topic-1"), (4, "topic-1, topic-3")])
def test_partition_claimed_twice_is_withheld_until_both_revoke(assignor, count, expected_c1):
    ppt = {T: count}
    subs = {
        C1: sub_v2(assignor, [T], [tp(T, 0), tp(T, 1)], GEN),
        C2: sub_v2(assignor, [T], [tp(T, 0), tp(T, 2)], GEN),
        C3: sub_v2(assignor, [T], [], GEN),
    }
    assignment = assign(assignor, ppt, subs)
    assert assignment == {C1: tps(expected_c1), C2: [tp(T, 2)], C3: []}
    final = verify(assignor, ppt, subs, assignment)  # the follow-up rebalance hands topic-0 out
    assert final[C3] == [tp(T, 0)]
    assert is_fully_balanced(final)


def test_member_data_takes_owned_partitions_from_the_subscription(assignor):
    assignor.on_assignment(Assignment([tp(T, 1)]), GEN)
    user_data = assignor.subscription_user_data([T], [])
    data = assignor.member_data(sub([T], [tp(T, 0)], user_data=user_data))
    assert (data.partitions, data.generation) == ([tp(T, 0)], GEN)


@pytest.mark.parametrize("user_data_generation", [GEN, GEN - 1])
def test_subscription_generation_wins_over_user_data(assignor, user_data_generation):
    data = assignor.member_data(
        sub([T], [], GEN, user_data=encode_cooperative_user_data(user_data_generation))
    )
    assert (data.partitions, data.generation) == ([], GEN)


def test_assignor_with_old_version_subscriptions(assignor):
    subs = {
        C1: sub_v1(assignor, [T1], [tp(T1, 0)], GEN),
        C2: sub_v1(assignor, [T1], [tp(T1, 1)], GEN),
        C3: sub_v2(assignor, [T1], [], GEN),
    }
    assert assign(assignor, {T1: 3}, subs) == {C1: [tp(T1, 0)], C2: [tp(T1, 1)], C3: [tp(T1, 2)]}


def test_joining_member_waits_one_rebalance_for_moved_partitions(assignor):
    """Constrained case: the newcomer's share is first only revoked from its owner."""
    ppt = {T: 4}
    subs = {C1: sub_v2(assignor, [T], tps("topic-0, topic-1, topic-2, topic-3"), GEN)}
    subs[C2] = sub_v2(assignor, [T], [], GEN)
    first = assign(assignor, ppt, subs)
    assert first == {C1: tps("topic-0, topic-1"), C2: []}
    assert assignor.partitions_transferring_ownership == {tp(T, 2): C2, tp(T, 3): C2}

    subs[C1] = sub_v2(assignor, [T], first[C1], GEN + 1)  # C1 revoked topic-2, topic-3
    subs[C2] = sub_v2(assignor, [T], first[C2], GEN + 1)
    second = assign(assignor, ppt, subs)
    assert second == {C1: tps("topic-0, topic-1"), C2: tps("topic-2, topic-3")}
    assert assignor.partitions_transferring_ownership == {}


def test_moves_in_the_general_case_are_computed_from_owned_partitions(assignor):
    """General case: moving partitions are those one member gains and another still owns."""
    ppt = {T1: 4, T2: 2}
    subs = {
        C1: sub_v2(assignor, [T1, T2], tps("topic1-0, topic1-1, topic1-2, topic1-3"), GEN),
        C2: sub_v2(assignor, [T1], [], GEN),
    }
    first = assign(assignor, ppt, subs)
    assert assignor.partitions_transferring_ownership is None
    # balancing moves topic1-0..2 to consumer2 (only consumer1 can take topic2): withheld for now
    assert first == {C1: tps("topic1-3, topic2-0, topic2-1"), C2: []}
    final = verify(assignor, ppt, subs, first)
    assert final == {
        C1: tps("topic1-3, topic2-0, topic2-1"),
        C2: tps("topic1-0, topic1-1, topic1-2"),
    }


def test_a_partition_freed_by_a_leaving_member_moves_at_once(assignor):
    """No one else owns it any more, so nothing has to be revoked first."""
    ppt = {T: 2}
    subs = {C2: sub_v2(assignor, [T], [tp(T, 1)], GEN)}  # consumer1 (owner of topic-0) left
    assert assign(assignor, ppt, subs) == {C2: [tp(T, 0), tp(T, 1)]}


def test_two_step_convergence_matches_kafka(assignor):
    """Kafka's rack test, non-rack path: misplaced claims are first trimmed to an intermediate
    assignment (everything moving withheld), then the follow-up completes it."""
    topics = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    ppt = {"t1": 6, "t2": 7, "t3": 2}

    def round_with(owned: list[str]) -> list[str]:
        subs = {f"consumer{i}": sub(topics[i], tps(owned[i])) for i in range(3)}
        result = assign(assignor, ppt, subs)
        return [", ".join(map(str, result[f"consumer{i}"])) for i in range(3)]

    intermediate = round_with(
        [
            "t1-0, t1-1, t1-2, t1-3, t1-4",
            "t1-5, t2-0, t2-1, t2-2, t2-3",
            "t2-4, t2-5, t2-6, t3-0, t3-1",
        ]
    )
    assert intermediate == ["t1-2, t1-3, t1-4", "t2-0, t2-1, t2-2, t2-3", "t3-0, t3-1"]
    assert round_with(intermediate) == [
        "t1-2, t1-3, t1-4, t2-4, t2-5",
        "t2-0, t2-1, t2-2, t2-3, t2-6",
        "t1-0, t1-1, t1-5, t3-0, t3-1",
    ]
