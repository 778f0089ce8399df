"""AlterPartition's checks in Kafka's order (unknown partition, leader epoch, leader, partition
epoch, ISR shape, live members) and producer id blocks."""

from __future__ import annotations

import pytest

from riverlog.common.cluster.image import PartitionInfo, TopicInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.metadata.controller.alter_partition import (
    AlterPartitionItem,
    check_alter_partition,
)
from riverlog.services.metadata.controller.producer_ids import (
    BLOCK_SIZE,
    decode_next,
    encode_next,
    next_block,
)

CURRENT = PartitionInfo(0, 1, 5, (1, 2, 3), (1, 2, 3), 9)
TOPICS = {"t": TopicInfo("t", "id", (CURRENT,))}


def item(isr=(1, 2), leader_epoch=5, partition_epoch=9, topic="t", partition=0):
    return AlterPartitionItem(topic, partition, leader_epoch, tuple(isr), partition_epoch)


def check(it, sender=1, live=(1, 2, 3)):
    return check_alter_partition(it, sender, TOPICS, set(live))


def test_shrink_bumps_the_partition_epoch_only():
    out = check(item(isr=(1, 3)))
    assert out.error_code == ErrorCode.NONE and out.after is not None
    assert out.after.isr == (1, 3)
    assert (out.after.leader, out.after.leader_epoch, out.after.partition_epoch) == (1, 5, 10)
    assert out.state == out.after


def test_expand_back():
    shrunk = PartitionInfo(0, 1, 5, (1, 2, 3), (1,), 9)
    out = check_alter_partition(item(isr=(1, 2)), 1, {"t": TopicInfo("t", "id", (shrunk,))}, {1, 2})
    assert out.after is not None and out.after.isr == (1, 2)


def test_same_isr_is_answered_without_a_write():
    out = check(item(isr=(1, 2, 3)))
    assert out.error_code == ErrorCode.NONE and out.after is None and out.state == CURRENT


@pytest.mark.parametrize(
    ("it", "sender", "live", "code"),
    [
        (item(topic="nope"), 1, (1, 2, 3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (item(partition=4), 1, (1, 2, 3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (item(leader_epoch=4), 1, (1, 2, 3), ErrorCode.FENCED_LEADER_EPOCH),
        (item(leader_epoch=6), 1, (1, 2, 3), ErrorCode.UNKNOWN_LEADER_EPOCH),
        (item(isr=(2, 3)), 2, (1, 2, 3), ErrorCode.NOT_LEADER_OR_FOLLOWER),
        (item(partition_epoch=8), 1, (1, 2, 3), ErrorCode.INVALID_UPDATE_VERSION),
        (item(isr=()), 1, (1, 2, 3), ErrorCode.INVALID_REQUEST),
        (item(isr=(2, 3)), 1, (1, 2, 3), ErrorCode.INVALID_REQUEST),  # leader missing
        (item(isr=(1, 7)), 1, (1, 2, 3, 7), ErrorCode.INVALID_REQUEST),  # not a replica
        (item(isr=(1, 1)), 1, (1, 2, 3), ErrorCode.INVALID_REQUEST),
        (item(isr=(1, 2)), 1, (1, 3), ErrorCode.INELIGIBLE_REPLICA),  # 2 is dead
    ],
)
def test_refusals(it, sender, live, code):
    out = check(it, sender, live)
    assert out.error_code == code and out.after is None
    if code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
        assert out.state == CURRENT  # the leader learns the state it must base a retry on


def test_producer_id_blocks_follow_each_other():
    first = next_block(0, 3)
    second = next_block(decode_next(encode_next(first.start + first.length, 3)), 4)
    assert (first.start, first.length) == (0, BLOCK_SIZE)
    assert second.start == BLOCK_SIZE and second.node_id == 4
    with pytest.raises(RiverlogError):
        next_block(2**63 - 10, 1)
