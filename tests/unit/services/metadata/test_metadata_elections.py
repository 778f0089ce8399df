"""Election rules as pure functions: a dead node leaves every ISR and its partitions get new
leaders in one batch, unclean election on and off, offline partitions coming back, restarted
nodes, preferred and unclean ElectLeaders, the imbalance check, and batches cut for etcd."""

from __future__ import annotations

from types import MappingProxyType

from riverlog.common.cluster.image import PartitionInfo, TopicInfo
from riverlog.common.errors import ErrorCode
from riverlog.services.metadata.controller.elections import (
    elect_preferred,
    elect_unclean,
    imbalanced,
    reconcile,
)
from riverlog.services.metadata.controller.replication import PARTITIONS_PER_TXN, chunks


def part(p, leader, replicas, isr, leader_epoch=3, partition_epoch=7):
    return PartitionInfo(p, leader, leader_epoch, tuple(replicas), tuple(isr), partition_epoch)


def topic(name, *partitions, unclean=None):
    configs = {} if unclean is None else {"unclean.leader.election.enable": unclean}
    return TopicInfo(name, "id-" + name, tuple(partitions), MappingProxyType(configs))


def by_partition(updates):
    return {(u.topic, u.after.partition): u.after for u in updates}


def test_dead_leader_first_live_isr_member_in_replica_order_leads():
    t = topic("t", part(0, 1, (1, 3, 2), (2, 1, 3)))
    [u] = reconcile([t], live={2, 3})
    assert u.after.leader == 3  # replica order, not ISR order
    assert u.after.isr == (2, 3)
    assert (u.after.leader_epoch, u.after.partition_epoch) == (4, 8)
    assert u.elected and not u.offline


def test_dead_follower_leaves_the_isr_without_an_election():
    t = topic("t", part(0, 1, (1, 2, 3), (1, 2, 3)))
    [u] = reconcile([t], live={1, 3})
    assert u.after.leader == 1 and u.after.isr == (1, 3)
    assert u.after.leader_epoch == 3 and u.after.partition_epoch == 8
    assert not u.elected


def test_every_partition_of_the_dead_node_changes_in_one_batch():
    parts = [
        part(p, 1 + p % 3, (1 + p % 3, 1 + (p + 1) % 3), (1 + p % 3, 1 + (p + 1) % 3))
        for p in range(9)
    ]
    updates = reconcile([topic("t", *parts)], live={2, 3})
    assert {u.after.partition for u in updates} == {p for p in range(9) if 1 in parts[p].replicas}
    for u in updates:
        assert 1 not in u.after.isr
        assert u.after.leader != 1
        if u.before.leader == 1:
            assert u.after.leader_epoch == u.before.leader_epoch + 1


def test_settled_image_reconciles_to_nothing():
    t = topic("t", part(0, 1, (1, 2), (1, 2)), part(1, -1, (3,), (3,)))
    assert reconcile([t], live={1, 2}) == []


def test_no_live_isr_member_without_unclean_goes_offline_keeping_the_isr():
    t = topic("t", part(0, 1, (1, 2, 3), (1,)))
    [u] = reconcile([t], live={2, 3})
    assert u.after.leader == -1 and u.after.isr == (1,)
    assert u.offline and u.after.leader_epoch == 4


def test_whole_isr_dying_at_once_leaves_it_unchanged():
    t = topic("t", part(0, 1, (1, 2, 3), (1, 2)))
    [u] = reconcile([t], live={3})
    assert u.after.leader == -1 and u.after.isr == (1, 2)


def test_unclean_election_first_live_replica_leads_alone():
    t = topic("t", part(0, 1, (1, 2, 3), (1,)), unclean="true")
    [u] = reconcile([t], live={3, 2})
    assert u.after.leader == 2 and u.after.isr == (2,)
    assert u.after.leader_epoch == 4


def test_offline_partition_gets_its_isr_member_back_when_it_returns():
    t = topic("t", part(0, -1, (1, 2, 3), (1,), leader_epoch=4))
    assert reconcile([t], live={2, 3}) == []  # not eligible without unclean election
    [u] = reconcile([t], live={1, 2, 3})
    assert u.after.leader == 1 and u.after.leader_epoch == 5


def test_restarted_leader_hands_over_to_an_in_sync_follower():
    t = topic("t", part(0, 1, (1, 2, 3), (1, 2, 3)))
    [u] = reconcile([t], live={1, 2, 3}, restarted={1})
    assert u.after.leader == 2 and u.after.isr == (2, 3)
    assert (u.after.leader_epoch, u.after.partition_epoch) == (4, 8)


def test_restarted_sole_replica_leads_again_under_a_new_epoch():
    t = topic("t", part(0, 1, (1,), (1,)))
    [u] = reconcile([t], live={1}, restarted={1})
    assert u.after.leader == 1 and u.after.isr == (1,)
    assert (u.after.leader_epoch, u.after.partition_epoch) == (4, 8)


def test_preferred_election_moves_leadership_back():
    t = topic(
        "t",
        part(0, 2, (1, 2), (1, 2)),
        part(1, 1, (1, 2), (1, 2)),
        part(2, 2, (1, 2), (2,)),
    )
    updates, results = elect_preferred({"t": t}, live={1, 2})
    assert by_partition(updates)[("t", 0)].leader == 1
    codes = {r.partition: r.error_code for r in results}
    assert codes == {
        0: ErrorCode.NONE,
        1: ErrorCode.ELECTION_NOT_NEEDED,
        2: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    }
    _, unknown = elect_preferred({"t": t}, live={1, 2}, wanted=[("t", 9), ("x", 0)])
    assert {r.error_code for r in unknown} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_preferred_replica_dead_is_not_available():
    t = topic("t", part(0, 2, (1, 2), (1, 2)))
    updates, [r] = elect_preferred({"t": t}, live={2})
    assert updates == [] and r.error_code == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_unclean_election_request():
    t = topic("t", part(0, -1, (1, 2), (1,)), part(1, 2, (1, 2), (2,)), part(2, -1, (3,), (3,)))
    updates, results = elect_unclean({"t": t}, live={2})
    assert by_partition(updates)[("t", 0)].leader == 2
    assert by_partition(updates)[("t", 0)].isr == (2,)
    codes = {r.partition: r.error_code for r in results}
    assert codes == {
        0: ErrorCode.NONE,
        1: ErrorCode.ELECTION_NOT_NEEDED,
        2: ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
    }


def test_imbalance_above_the_percentage_moves_in_sync_preferred_leaders():
    parts = [part(p, 2, (1, 2), (1, 2)) for p in range(3)] + [part(3, 1, (1, 2), (1, 2))]
    t = topic("t", *parts, part(4, 1, (2, 1), (2, 1)))
    assert sorted(imbalanced([t], {1, 2}, 10)) == [("t", 0), ("t", 1), ("t", 2), ("t", 4)]
    assert imbalanced([t], {1, 2}, 100) == []
    assert imbalanced([t], {2}, 10) == [("t", 4)]  # node 1 is not live


def test_batches_above_etcds_operation_limit_are_cut():
    n = 3 * PARTITIONS_PER_TXN + 7
    parts = [part(p, 1, (1, 2), (1, 2)) for p in range(n)]
    updates = reconcile([topic("t", *parts)], live={2})
    assert len(updates) == n
    cut = chunks(updates, PARTITIONS_PER_TXN)
    assert [len(c) for c in cut] == [PARTITIONS_PER_TXN] * 3 + [7]
    assert PARTITIONS_PER_TXN + 1 <= 128  # the fence and each partition compare
    assert [u for c in cut for u in c] == updates
