"""The reassignment state machine (KIP-455): start, complete once the target is in sync, cancel,
epochs, the leader leaving, replication factor changes, and Kafka's validation errors."""

from __future__ import annotations

import pytest

from riverlog.common.cluster.image import PartitionInfo, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.metadata.controller import reassignment as ra
from riverlog.services.metadata.records import partition_decode, partition_encode

LIVE = {1, 2, 3, 4, 5}


def state(leader=1, replicas=(1, 2, 3), isr=(1, 2, 3), adding=(), removing=(), epoch=4, pe=9):
    return PartitionInfo(
        0, leader, epoch, tuple(replicas), tuple(isr), pe, tuple(adding), tuple(removing)
    )


def topic(partitions=None, **configs):
    return TopicInfo("t", "id", tuple(partitions or (state(),)), configs)


def test_reassignment_replicas_kafka_order():
    sets = ra.PartitionReassignmentReplicas.of((1, 2, 3), (2, 3, 4))
    assert (sets.replicas, sets.adding, sets.removing) == ((2, 3, 4, 1), (4,), (1,))
    assert sets.target == (2, 3, 4)
    assert sets.original == (2, 3, 1)


def test_start_adds_replicas_keeps_leader_and_isr():
    after = ra.start(state(), [2, 3, 4], LIVE)
    assert after is not None
    assert after.replicas == (2, 3, 4, 1)
    assert (after.adding_replicas, after.removing_replicas) == ((4,), (1,))
    assert after.isr == (1, 2, 3)
    assert (after.leader, after.leader_epoch, after.partition_epoch) == (1, 4, 10)
    assert ra.is_reassigning(after)


def test_not_complete_until_every_target_in_isr():
    moving = ra.start(state(), [2, 3, 4], LIVE)
    assert moving is not None
    assert ra.complete(moving, LIVE) is None


def test_complete_moves_leader_off_leaving_replica():
    moving = state(replicas=(2, 3, 4, 1), isr=(1, 2, 3, 4), adding=(4,), removing=(1,))
    done = ra.complete(moving, LIVE)
    assert done is not None
    assert done.replicas == (2, 3, 4)
    assert done.isr == (2, 3, 4)
    assert (done.adding_replicas, done.removing_replicas) == ((), ())
    assert done.leader == 2
    assert (done.leader_epoch, done.partition_epoch) == (5, 10)


def test_complete_leader_goes_to_first_live_target_in_isr():
    moving = state(replicas=(5, 3, 4, 1), isr=(1, 3, 4, 5), adding=(5, 4), removing=(1,))
    done = ra.complete(moving, {1, 3, 4})  # 5 in the ISR but not live
    assert done is not None and done.leader == 3


def test_complete_keeps_staying_leader_and_its_epoch():
    moving = state(leader=2, replicas=(2, 3, 4, 1), isr=(1, 2, 3, 4), adding=(4,), removing=(1,))
    done = ra.complete(moving, LIVE)
    assert done is not None
    assert (done.leader, done.leader_epoch, done.partition_epoch) == (2, 4, 10)


def test_complete_nothing_in_progress():
    assert ra.complete(state(), LIVE) is None


def test_shrink_in_sync_completes_in_one_change():
    done = ra.start(state(), [2, 3], LIVE)
    assert done is not None
    assert (done.replicas, done.isr, done.leader) == ((2, 3), (2, 3), 2)
    assert not ra.is_reassigning(done)
    assert (done.leader_epoch, done.partition_epoch) == (5, 10)


def test_increase_replication_factor():
    after = ra.start(state(), [1, 2, 3, 4, 5], LIVE)
    assert after is not None
    assert (after.replicas, after.adding_replicas, after.removing_replicas) == (
        (1, 2, 3, 4, 5),
        (4, 5),
        (),
    )
    caught_up = PartitionInfo(0, 1, 4, after.replicas, (1, 2, 3, 4, 5), 11, (4, 5), ())
    done = ra.complete(caught_up, LIVE)
    assert done is not None
    assert (done.replicas, done.isr, done.leader, done.leader_epoch) == (
        (1, 2, 3, 4, 5),
        (1, 2, 3, 4, 5),
        1,
        4,
    )
    assert (done.adding_replicas, done.removing_replicas, done.partition_epoch) == ((), (), 12)


def test_same_target_changes_nothing():
    assert ra.start(state(), [1, 2, 3], LIVE) is None


def test_reorder_only_changes_replica_order():
    after = ra.start(state(), [3, 2, 1], LIVE)
    assert after is not None
    assert (after.replicas, after.leader, after.adding_replicas) == ((3, 2, 1), 1, ())


def test_new_target_replaces_one_in_progress():
    moving = state(replicas=(2, 3, 4, 1), isr=(1, 2, 3), adding=(4,), removing=(1,))
    after = ra.start(moving, [2, 3, 5], LIVE)
    assert after is not None
    assert after.replicas == (2, 3, 5, 4, 1)
    assert (after.adding_replicas, after.removing_replicas) == ((5,), (4, 1))


def test_cancel_restores_original_replicas():
    moving = state(replicas=(2, 3, 4, 1), isr=(1, 2, 3, 4), adding=(4,), removing=(1,))
    after = ra.cancel(moving, LIVE)
    assert (after.replicas, after.isr, after.leader) == ((2, 3, 1), (1, 2, 3), 1)
    assert (after.adding_replicas, after.removing_replicas) == ((), ())
    assert (after.leader_epoch, after.partition_epoch) == (4, 10)


def test_cancel_moves_leader_back_from_adding_replica():
    moving = state(leader=4, replicas=(2, 3, 4, 1), isr=(1, 2, 3, 4), adding=(4,), removing=(1,))
    after = ra.cancel(moving, LIVE)
    assert after.leader == 2 and after.leader_epoch == 5
    assert 4 not in after.replicas and 4 not in after.isr


def test_cancel_without_reassignment():
    with pytest.raises(RiverlogError) as err:
        ra.cancel(state(), LIVE)
    assert err.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_cancel_refused_when_no_original_replica_in_sync():
    moving = state(leader=4, replicas=(4, 1), isr=(4,), adding=(4,), removing=(1,))
    with pytest.raises(RiverlogError) as err:
        ra.cancel(moving, LIVE)
    assert err.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT


def test_completable_lists_ready_moves_only():
    ready = state(replicas=(2, 3, 4, 1), isr=(1, 2, 3, 4), adding=(4,), removing=(1,))
    waiting = PartitionInfo(1, 1, 0, (2, 3, 4, 1), (1, 2, 3), 0, (4,), (1,))
    found = ra.completable({"t": topic((ready, waiting))}, LIVE)
    assert [(name, before.partition, after.replicas) for name, before, after in found] == [
        ("t", 0, (2, 3, 4))
    ]


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ([2, 2, 3], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ([2, 3, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ([2], ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
def test_validate_target(target, code):
    with pytest.raises(RiverlogError) as err:
        ra.validate_target(topic(**{"min.insync.replicas": "2"}), 0, target, LIVE)
    assert err.value.code == code


def test_validate_target_accepts_live_distinct():
    ra.validate_target(topic(**{"min.insync.replicas": "2"}), 0, [2, 3], LIVE)


def test_a_move_may_keep_a_draining_node_but_never_add_one():
    current = state(replicas=(1, 2, 3))
    with pytest.raises(RiverlogError, match=r"\[4\] are being drained") as err:
        ra.validate_not_draining(topic(), current, 0, [2, 3, 4], draining={4})
    assert err.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    ra.validate_not_draining(topic(), current, 0, [3, 1, 2], draining={1})  # a reorder
    ra.validate_not_draining(topic(), current, 0, [2, 3, 5], draining={1})  # the drain itself


def test_find_partition_unknown():
    for name, partition in (("nope", 0), ("t", 7)):
        with pytest.raises(RiverlogError) as err:
            ra.find_partition({"t": topic()}, name, partition)
        assert err.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_partition_record_round_trip_keeps_the_move():
    moving = state(replicas=(2, 3, 4, 1), adding=(4,), removing=(1,))
    assert partition_decode(0, partition_encode(moving)) == moving
    idle = state()
    assert b"adding" not in partition_encode(idle)  # records of idle partitions unchanged
    assert partition_decode(0, partition_encode(idle)) == idle
