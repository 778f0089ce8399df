"""Replica placement against Kafka's own AdminUtils examples, plus the properties Kafka's
assignment guarantees (even leaders, distinct replicas, rack spread, determinism)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.metadata.controller.placement import (
    NodePlacement,
    assign_rack_aware,
    assign_rack_unaware,
    assign_replicas,
    rack_alternated,
    start_index_for_new_partitions,
)

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def test_kafka_rack_unaware_example():
    # AdminUtilsTest.testReplicaAssignment: 5 brokers, 10 partitions, rf 3, fixed start 0.
    expected = {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }
    nodes = [NodePlacement(i) for i in range(5)]
    assert assign_replicas(nodes, 10, 3, start_index=0) == expected
    assert assign_rack_unaware(10, 3, [4, 3, 2, 1, 0], 0, 0) == expected  # ids sorted first


def test_kafka_rack_alternated_broker_list():
    # AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    assert rack_alternated(RACKS) == [0, 3, 1, 5, 4, 2]
    without_5 = {k: v for k, v in RACKS.items() if k != 5}
    assert rack_alternated(without_5) == [0, 3, 1, 4, 2]


def test_kafka_rack_aware_example():
    expected = {
        0: [0, 3, 1],
        1: [3, 1, 5],
        2: [1, 5, 4],
        3: [5, 4, 2],
        4: [4, 2, 0],
        5: [2, 0, 3],
        6: [0, 4, 2],
    }
    assert assign_rack_aware(7, 3, RACKS, 0, 0) == expected
    nodes = [NodePlacement(i, r) for i, r in RACKS.items()]
    assert assign_replicas(nodes, 7, 3, start_index=0) == expected


@pytest.mark.parametrize("rf", [1, 2, 3])
def test_rack_aware_spreads_each_partition_over_racks(rf):
    nodes = [NodePlacement(i, r) for i, r in RACKS.items()]
    assignment = assign_replicas(nodes, 12, rf, rng=random.Random(7))
    for replicas in assignment.values():
        assert len(set(replicas)) == rf
        assert len({RACKS[r] for r in replicas}) == min(rf, 3)


def test_rack_unaware_when_any_node_lacks_a_rack():
    nodes = [NodePlacement(0, "a"), NodePlacement(1, ""), NodePlacement(2, "b")]
    assert assign_replicas(nodes, 3, 2, start_index=0) == assign_rack_unaware(3, 2, [0, 1, 2], 0, 0)


def test_leaders_are_balanced_and_replicas_distinct():
    nodes = [NodePlacement(i) for i in range(4)]
    assignment = assign_replicas(nodes, 40, 3, rng=random.Random(1))
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert set(leaders.values()) == {10}
    assert all(len(set(r)) == 3 for r in assignment.values())
    assert sorted(assignment) == list(range(40))


def test_seeded_rng_is_deterministic():
    nodes = [NodePlacement(i) for i in range(7)]
    a = assign_replicas(nodes, 9, 2, rng=random.Random(42))
    b = assign_replicas(nodes, 9, 2, rng=random.Random(42))
    assert a == b


def test_new_partitions_continue_the_walk():
    nodes = [NodePlacement(i) for i in range(5)]
    full = assign_replicas(nodes, 10, 3, start_index=0)
    start = start_index_for_new_partitions(nodes, full[0][0])
    tail = assign_replicas(nodes, 4, 3, start_index=start, start_partition=6)
    # Leaders keep the round-robin of the existing partitions (as Kafka, the follower shift
    # restarts from the start index rather than from where the first walk left it).
    assert sorted(tail) == [6, 7, 8, 9]
    assert [tail[p][0] for p in range(6, 10)] == [full[p][0] for p in range(6, 10)]
    assert all(len(set(r)) == 3 for r in tail.values())
    assert start_index_for_new_partitions([NodePlacement(3), NodePlacement(5)], 4) == 1


@pytest.mark.parametrize(
    ("partitions", "rf", "nodes", "code"),
    [
        (0, 1, 3, ErrorCode.INVALID_PARTITIONS),
        (-1, 1, 3, ErrorCode.INVALID_PARTITIONS),
        (1, 0, 3, ErrorCode.INVALID_REPLICATION_FACTOR),
        (1, 4, 3, ErrorCode.INVALID_REPLICATION_FACTOR),
        (1, 1, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
def test_bad_requests(partitions, rf, nodes, code):
    with pytest.raises(RiverlogError) as err:
        assign_replicas([NodePlacement(i) for i in range(nodes)], partitions, rf)
    assert err.value.code == code
