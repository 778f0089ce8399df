"""Kafka's StickyAssignorTest (the eager "sticky" assignor), ported, plus its user-data bytes."""

from __future__ import annotations

import struct

import pytest
from assignor_testkit import (
    DEFAULT_GENERATION,
    assign,
    is_fully_balanced,
    sub,
    sub_v0,
    sub_v1,
    sub_v2,
    tp,
    tps,
    verify,
)

from riverlog.common.assignors import Assignment, StickyAssignor
from riverlog.common.assignors.sticky.userdata import (
    decode_sticky_user_data,
    encode_sticky_user_data,
)

T, T1, T2, T3 = "topic", "topic1", "topic2", "topic3"
C1, C2, C3 = "consumer1", "consumer2", "consumer3"
GEN = 1


@pytest.fixture
def assignor() -> StickyAssignor:
    return StickyAssignor()


def user_data_v0(partitions) -> bytes:
    """STICKY_ASSIGNOR_USER_DATA_V0 (Kafka < 2.3): the previous assignment, no generation."""
    by_topic: dict[str, list[int]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p.partition)
    out = struct.pack(">i", len(by_topic))
    for topic, numbers in by_topic.items():
        out += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(numbers))
        out += b"".join(struct.pack(">i", n) for n in numbers)
    return out


@pytest.mark.parametrize(
    ("partitions_per_consumer", "expected_c1"), [(3, "topic-1"), (4, "topic-1, topic-3")]
)
def test_partition_claimed_twice_in_one_generation_goes_to_another_member(
    assignor, partitions_per_consumer, expected_c1
):
    subs = {
        C1: sub_v2(assignor, [T], [tp(T, 0), tp(T, 1)], GEN),
        C2: sub_v2(assignor, [T], [tp(T, 0), tp(T, 2)], GEN),
        C3: sub_v2(assignor, [T], [], GEN),
    }
    assignment = assign(assignor, {T: partitions_per_consumer}, subs)
    assert assignment == {C1: tps(expected_c1), C2: [tp(T, 2)], C3: [tp(T, 0)]}


@pytest.mark.parametrize("all_equal", [True, False])
def test_assignment_with_multiple_generations_1(assignor, all_equal):
    ppt = {T: 6, T2: 6}
    everything = [T, T2]
    c2_topics = everything if all_equal else [T]
    subs = {C1: sub(everything), C2: sub(c2_topics), C3: sub(everything)}
    r1 = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert [len(r1[c]) for c in (C1, C2, C3)] == [4, 4, 4]

    subs[C1] = sub_v2(assignor, everything, r1[C1], GEN)
    subs[C2] = sub_v2(assignor, c2_topics, r1[C2], GEN)
    del subs[C3]
    r2 = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert [len(r2[C1]), len(r2[C2])] == [6, 6]
    if all_equal:
        assert set(r1[C1]) <= set(r2[C1])
    assert set(r1[C2]) <= set(r2[C2])
    assert set(r2[C2]) & set(r1[C3])

    del subs[C1]
    subs[C2] = sub_v2(assignor, c2_topics, r2[C2], 2)
    subs[C3] = sub_v2(assignor, everything, r1[C3], 1)
    r3 = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert [len(r3[C2]), len(r3[C3])] == [6, 6]
    assert not set(r3[C2]) & set(r3[C3])
    assert is_fully_balanced(r3)


@pytest.mark.parametrize("all_equal", [True, False])
def test_assignment_with_multiple_generations_2(assignor, all_equal):
    ppt = {T: 4, T2: 4, T3: 4}
    everything = [T, T2, T3]
    c1_topics = everything if all_equal else [T]
    c3_topics = everything if all_equal else [T, T2]
    subs = {C1: sub(c1_topics), C2: sub(everything), C3: sub(c3_topics)}
    r1 = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert [len(r1[c]) for c in (C1, C2, C3)] == [4, 4, 4]

    del subs[C1], subs[C3]
    subs[C2] = sub_v2(assignor, everything, r1[C2], 1)
    r2 = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert len(r2[C2]) == 12 and set(r1[C2]) <= set(r2[C2])

    subs[C1] = sub_v2(assignor, c1_topics, r1[C1], 1)
    subs[C2] = sub_v2(assignor, everything, r2[C2], 2)
    subs[C3] = sub_v2(assignor, c3_topics, r1[C3], 1)
    r3 = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert [len(r3[c]) for c in (C1, C2, C3)] == [4, 4, 4]


@pytest.mark.parametrize("all_equal", [True, False])
def test_assignment_with_conflicting_previous_generations(assignor, all_equal):
    ppt = {T: 4, T2: 4, T3: 4}
    everything = [T, T2, T3]
    c1_topics = everything if all_equal else [T]
    c2_topics = everything if all_equal else [T, T2]
    c1_owned = tps(
        "topic-0, topic-1, topic-2, topic2-2, topic2-3, topic3-0"
        if all_equal
        else "topic-0, topic-1, topic-2, topic-3"
    )
    c2_owned = tps("topic-0, topic-1, topic2-0, topic2-1, topic2-2, topic2-3")
    c3_owned = tps("topic-2, topic-3, topic3-0, topic3-1, topic3-2, topic3-3")
    subs = {
        C1: sub_v2(assignor, c1_topics, c1_owned, 1),
        C2: sub_v2(assignor, c2_topics, c2_owned, 2),
        C3: sub_v2(assignor, everything, c3_owned, 2),
    }
    assignment = verify(assignor, ppt, subs, assign(assignor, ppt, subs))
    assert [len(assignment[c]) for c in (C1, C2, C3)] == [4, 4, 4]
    assert set(assignment[C2]) <= set(c2_owned)
    assert set(assignment[C3]) <= set(c3_owned)


def test_schema_backward_compatibility(assignor):
    """A member still sending V0 user data (no generation) keeps what it had."""
    c1_owned, c2_owned = [tp(T, 0), tp(T, 2)], [tp(T, 1)]
    subs = {
        C1: sub_v2(assignor, [T], c1_owned, 1),
        C2: sub([T], user_data=user_data_v0(c2_owned)),
        C3: sub([T]),
    }
    assignment = verify(assignor, {T: 3}, subs, assign(assignor, {T: 3}, subs))
    assert [len(assignment[c]) for c in (C1, C2, C3)] == [1, 1, 1]
    assert set(assignment[C1]) <= set(c1_owned)
    assert assignment[C2] == c2_owned


def test_member_data_comes_from_user_data_not_owned_partitions(assignor):
    assignor.on_assignment(Assignment([tp(T, 1)]), GEN)
    user_data = assignor.subscription_user_data([T], [])
    data = assignor.member_data(sub([T], [tp(T, 0)], user_data=user_data))
    assert data.partitions == [tp(T, 1)]
    assert data.generation == GEN


def test_member_data_honours_the_user_data_generation(assignor):
    owned = [tp(T1, 0), tp(T2, 1)]
    subscription = sub([T], [], GEN, user_data=encode_sticky_user_data(owned, GEN - 1))
    data = assignor.member_data(subscription)
    assert data.partitions == owned
    assert data.generation == GEN - 1


def test_assignor_with_old_version_subscriptions(assignor):
    subs = {
        C1: sub_v0(assignor, [T1], [tp(T1, 0)], GEN),
        C2: sub_v1(assignor, [T1], [tp(T1, 1)], GEN),
        C3: sub_v2(assignor, [T1], [], GEN),
    }
    assert assign(assignor, {T1: 3}, subs) == {C1: [tp(T1, 0)], C2: [tp(T1, 1)], C3: [tp(T1, 2)]}


def test_javadoc_example_one(assignor):
    ppt = dict.fromkeys(("t0", "t1", "t2", "t3"), 2)
    subs = {c: sub(list(ppt)) for c in ("C0", "C1", "C2")}
    assert assign(assignor, ppt, subs) == {
        "C0": tps("t0-0, t1-1, t3-0"),
        "C1": tps("t0-1, t2-0, t3-1"),
        "C2": tps("t1-0, t2-1"),
    }


def test_misplaced_claims_are_ignored_and_result_matches_kafka(assignor):
    """Kafka's rack test, non-rack path: the eager assignor ignores the subscription's owned
    partitions (only user data counts), so the fresh assignment comes out."""
    owned = [
        "t1-0, t1-1, t1-2, t1-3, t1-4",
        "t1-5, t2-0, t2-1, t2-2, t2-3",
        "t2-4, t2-5, t2-6, t3-0, t3-1",
    ]
    topics = [["t1", "t2", "t3"], ["t1", "t2", "t3"], ["t1", "t3"]]
    subs = {f"consumer{i}": sub(topics[i], tps(owned[i])) for i in range(3)}
    assignment = assign(assignor, {"t1": 6, "t2": 7, "t3": 2}, subs)
    assert assignment == {
        "consumer0": tps("t1-5, t2-0, t2-2, t2-4, t2-6"),
        "consumer1": tps("t1-3, t2-1, t2-3, t2-5, t3-0"),
        "consumer2": tps("t1-0, t1-1, t1-2, t1-4, t3-1"),
    }


def test_subscription_user_data_before_and_after_an_assignment(assignor):
    assert assignor.subscription_user_data([T], []) is None
    assignor.on_assignment(Assignment([tp(T, 1), tp(T1, 0)]), 7)
    data = assignor.subscription_user_data([T, T1], [])
    assert data is not None
    partitions, generation = decode_sticky_user_data(data)
    assert (sorted(partitions), generation) == ([tp(T, 1), tp(T1, 0)], 7)


def test_user_data_v1_bytes():
    # int32 topics=1 | int16 5 "topic" | int32 2 | int32 0 | int32 3 | int32 generation 9
    golden = bytes.fromhex("000000010005746f70696300000002000000000000000300000009")
    assert encode_sticky_user_data([tp(T, 0), tp(T, 3)], 9) == golden
    assert decode_sticky_user_data(golden) == ([tp(T, 0), tp(T, 3)], 9)


def test_user_data_groups_topics_in_java_hashmap_order():
    """Kafka groups by topic in a HashMap: "payments" (bucket 7) before "orders" (bucket 10),
    whatever order the assignment lists them in."""
    data = encode_sticky_user_data([tp("orders", 0), tp("payments", 0), tp("orders", 1)], 1)
    assert data.index(b"payments") < data.index(b"orders")
    assert decode_sticky_user_data(data) == (
        [tp("payments", 0), tp("orders", 0), tp("orders", 1)],
        1,
    )


def test_user_data_v0_is_read_without_generation():
    assert decode_sticky_user_data(user_data_v0([tp(T, 2)])) == ([tp(T, 2)], None)


@pytest.mark.parametrize(
    "garbage",
    [b"\x00", b"\x00\x00\x00\x01\x00\x05top", b"\xff\xff\xff\xff", b"\x00\x00\x00\x01\xff\xfe"],
)
def test_unreadable_user_data_means_no_previous_assignment(garbage):
    assert decode_sticky_user_data(garbage) == ([], DEFAULT_GENERATION)


def test_empty_user_data_means_unknown_generation(assignor):
    data = assignor.member_data(sub([T], user_data=b""))
    assert (data.partitions, data.generation) == ([], None)
