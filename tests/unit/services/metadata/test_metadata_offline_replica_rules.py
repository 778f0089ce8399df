"""Replicas on offline log dirs (decision 0022) as pure functions: the controller treats such a
replica as dead for its partition only, so it leaves the ISR and its leadership moves under a
new leader epoch, it is never elected (reconcile, preferred, unclean) nor let back into the
ISR by AlterPartition, and the node's other partitions stay as they are."""

from __future__ import annotations

import pytest

from riverlog.common.cluster.image import NodeInfo, PartitionInfo, TopicInfo
from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.metadata.controller.alter_partition import (
    AlterPartitionItem,
    check_alter_partition,
)
from riverlog.services.metadata.controller.elections import (
    elect_preferred,
    elect_unclean,
    reconcile,
)
from riverlog.services.metadata.controller.partition_change import (
    eligible_nodes,
    offline_by_partition,
)

LIVE = frozenset({1, 2, 3})


def part(p, leader, isr=(1, 2, 3), replicas=(1, 2, 3), leader_epoch=3, partition_epoch=7):
    return PartitionInfo(p, leader, leader_epoch, tuple(replicas), tuple(isr), partition_epoch)


def topics(*partitions, unclean=False):
    configs = {"unclean.leader.election.enable": "true"} if unclean else {}
    return {"t": TopicInfo("t", "id", tuple(partitions), configs)}


def off(*pairs):
    """{TopicPartition('t', p): {node}} for each (p, node)."""
    found: dict[TopicPartition, frozenset[int]] = {}
    for p, node in pairs:
        found[TopicPartition("t", p)] = found.get(TopicPartition("t", p), frozenset()) | {node}
    return found


def test_offline_replicas_by_partition_from_the_registrations():
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    nodes = [
        NodeInfo("storage", 1, "h", 1, offline_replicas=frozenset({a, b})),
        NodeInfo("storage", 2, "h", 2, offline_replicas=frozenset({a})),
        NodeInfo("storage", 3, "h", 3),
    ]
    assert offline_by_partition(nodes) == {a: {1, 2}, b: {1}}
    assert eligible_nodes(LIVE, offline_by_partition(nodes), "t", 0) == {3}
    assert eligible_nodes(LIVE, offline_by_partition(nodes), "t", 2) == LIVE


def test_an_offline_leader_replica_moves_leadership_and_leaves_the_isr():
    ts = topics(part(0, 1), part(1, 1, replicas=(1, 3, 2)), part(2, 2))
    updates = reconcile(ts.values(), LIVE, offline=off((0, 1)))
    [u] = updates  # only the partition on the failed dir; p1 (also led by 1) stays
    assert (u.topic, u.after.partition) == ("t", 0)
    assert u.after.leader == 2 and u.after.isr == (2, 3)
    assert (u.after.leader_epoch, u.after.partition_epoch) == (4, 8)
    assert u.elected and not u.offline


def test_an_offline_follower_replica_leaves_the_isr_without_an_election():
    [u] = reconcile(topics(part(0, 1)).values(), LIVE, offline=off((0, 3)))
    assert u.after.leader == 1 and u.after.isr == (1, 2)
    assert (u.after.leader_epoch, u.after.partition_epoch) == (3, 8)


def test_reconcile_is_idempotent_and_never_elects_the_offline_replica_again():
    ts = topics(part(0, 1))
    [u] = reconcile(ts.values(), LIVE, offline=off((0, 1)))
    settled = topics(u.after)
    assert reconcile(settled.values(), LIVE, offline=off((0, 1))) == []
    # the new leader dies too: node 3 leads, never node 1 (its replica is offline)
    [u2] = reconcile(settled.values(), {1, 3}, offline=off((0, 1)))
    assert u2.after.leader == 3 and 1 not in u2.after.isr
    # the last in-sync replica dies: offline partition, not a leader on the failed dir
    [u3] = reconcile(topics(u2.after).values(), {1}, offline=off((0, 1)))
    assert u3.offline and u3.after.isr == (3,)


def test_unclean_election_skips_offline_replicas():
    ts = topics(part(0, 2, isr=(2,)), unclean=True)
    [u] = reconcile(ts.values(), {1, 3}, offline=off((0, 1)))
    assert u.after.leader == 3 and u.after.isr == (3,)
    updates, results = elect_unclean(topics(part(0, -1, isr=(2,))), {1}, None, off((0, 1)))
    assert updates == [] and results[0].error_code == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE


def test_preferred_election_refuses_an_offline_preferred_replica():
    ts = topics(part(0, 2))
    updates, results = elect_preferred(ts, LIVE, None, off((0, 1)))
    assert updates == []
    assert results[0].error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    updates, _ = elect_preferred(ts, LIVE, None, off((0, 3)))  # another partition's dir
    assert updates[0].after.leader == 1


@pytest.mark.parametrize(
    ("state", "isr"),
    [
        (part(0, 2, isr=(2, 3)), (2, 3, 1)),  # a leader adding the replica on the failed dir
        (part(0, 1), (1, 2)),  # a leader whose own replica is on it, before the move lands
    ],
)
def test_alter_partition_refuses_an_offline_replica_in_the_isr(state, isr):
    ts = topics(state)
    it = AlterPartitionItem("t", 0, 3, isr, 7)
    out = check_alter_partition(it, state.leader, ts, LIVE, off((0, 1)))
    assert out.error_code == ErrorCode.INELIGIBLE_REPLICA and out.after is None
    other = check_alter_partition(it, state.leader, ts, LIVE, off((1, 1)))
    assert other.error_code == ErrorCode.NONE and other.after is not None
