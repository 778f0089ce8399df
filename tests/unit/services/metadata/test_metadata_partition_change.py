"""PartitionChangeBuilder: leader election from the ISR in replica order, epochs, unclean
election, offline partitions, and a node coming back under the same id."""

from __future__ import annotations

import pytest

from riverlog.common.cluster.image import PartitionInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.metadata.controller.partition_change import (
    PartitionChangeBuilder,
    new_partition,
)


def state(leader=1, replicas=(1, 2, 3), isr=(1, 2, 3), leader_epoch=4, partition_epoch=9):
    return PartitionInfo(0, leader, leader_epoch, tuple(replicas), tuple(isr), partition_epoch)


def test_new_partition_first_replica_leads():
    p = new_partition(3, [2, 0, 1])
    assert (p.partition, p.leader, p.leader_epoch, p.isr, p.partition_epoch) == (
        3,
        2,
        0,
        (2, 0, 1),
        0,
    )


def test_nothing_to_change():
    assert PartitionChangeBuilder(state(), {1, 2, 3}).build() is None


def test_leader_lost_next_in_sync_replica_leads():
    change = PartitionChangeBuilder(state(), {2, 3}).set_target_isr([2, 3]).build()
    assert change is not None and change.leader_changed and change.isr_changed
    assert change.partition.leader == 2
    assert change.partition.isr == (2, 3)
    assert change.partition.leader_epoch == 5
    assert change.partition.partition_epoch == 10


def test_isr_shrink_keeps_leader_and_epoch():
    change = PartitionChangeBuilder(state(), {1, 2, 3}).set_target_isr([1, 2]).build()
    assert change is not None and not change.leader_changed
    assert change.partition.leader == 1 and change.partition.leader_epoch == 4
    assert change.partition.partition_epoch == 10


def test_no_eligible_replica_goes_offline_keeping_the_last_isr():
    current = state(leader=1, isr=(1,))
    change = PartitionChangeBuilder(current, {2, 3}).build()
    assert change is not None
    assert change.partition.leader == -1
    assert change.partition.isr == (1,)
    assert change.partition.leader_epoch == 5


def test_unclean_election_picks_an_alive_replica():
    current = state(leader=1, isr=(1,))
    change = PartitionChangeBuilder(current, {3}, unclean_leader_election=True).build()
    assert change is not None
    assert change.partition.leader == 3 and change.partition.isr == (3,)


def test_node_back_with_same_id_leads_again():
    offline = state(leader=-1, replicas=(1,), isr=(1,), leader_epoch=2)
    change = PartitionChangeBuilder(offline, {1}).build()
    assert change is not None and change.partition.leader == 1
    assert change.partition.leader_epoch == 3


def test_preferred_leader_election():
    current = state(leader=2)
    change = PartitionChangeBuilder(current, {1, 2, 3}).elect_preferred_leader().build()
    assert change is not None and change.partition.leader == 1


def test_isr_outside_replicas_is_refused():
    with pytest.raises(RiverlogError) as err:
        PartitionChangeBuilder(state(), {1, 2, 3}).set_target_isr([1, 7]).build()
    assert err.value.code == ErrorCode.INVALID_REQUEST


def test_reassignment_drops_removed_replicas_from_isr():
    builder = PartitionChangeBuilder(state(), {1, 2, 3, 4}).set_target_replicas([2, 3, 4])
    change = builder.build()
    assert change is not None
    assert change.partition.replicas == (2, 3, 4)
    assert change.partition.leader == 2 and change.partition.isr == (2, 3)
    with pytest.raises(RiverlogError):
        PartitionChangeBuilder(state(), {1}).set_target_replicas([1, 1])
