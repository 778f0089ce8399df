"""The leader's high watermark and ISR upkeep with a manual clock: the high watermark over the
(maximal) ISR, ISR shrink after replica.lag.time.max.ms and expansion once caught up, one change
in flight, acks=all waiting in the purgatory (DelayedProduce) with NOT_ENOUGH_REPLICAS_AFTER_APPEND,
and self-fencing of produce."""

from __future__ import annotations

import asyncio
from pathlib import Path

from storage_replica_testkit import (
    NODE,
    OTHER,
    Node,
    image,
    make_batch,
    make_node,
    produce_params,
    topic,
)

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.isr import AlterIsrRequest, FollowerState, IsrState
from riverlog.services.storage.replica.requests import Acks, ListOffsetsPartitionData, OffsetSpec

T0 = TopicPartition("t", 0)
THIRD = 3
LAG = 10_000


def _node(tmp_path: Path, sent: list[AlterIsrRequest], may_lead: list[bool] | None = None) -> Node:
    flag = may_lead if may_lead is not None else [True]
    return make_node(
        tmp_path / "logs",
        ManualClock(),
        replica_lag_time_max_ms=LAG,
        alter_isr=sent.append,
        may_lead=lambda: flag[0],
    )


def _lead(
    node: Node,
    isr: tuple[int, ...] = (NODE, OTHER, THIRD),
    *,
    epoch: int = 1,
    partition_epoch: int = 0,
    version: int = 2,
    configs: dict[str, str] | None = None,
) -> None:
    node.replicas.apply_image(
        image(
            topic(
                "t",
                leaders=[NODE],
                epoch=epoch,
                replicas=[[NODE, OTHER, THIRD]],
                isr=[list(isr)],
                partition_epoch=partition_epoch,
                configs=configs,
            ),
            version=version,
        )
    )


def test_follower_state_caught_up_rule() -> None:
    state = FollowerState()
    state.update(fetch_offset=10, now_ms=1_000, leader_log_end_offset=10)
    assert state.last_caught_up_ms == 1_000
    # Behind the leader's end now, but at the end the leader had at the previous fetch.
    state.update(fetch_offset=10, now_ms=2_000, leader_log_end_offset=15)
    assert state.last_caught_up_ms == 1_000
    state.update(fetch_offset=15, now_ms=3_000, leader_log_end_offset=20)
    assert state.last_caught_up_ms == 2_000
    assert not state.lagging(now_ms=12_000, leader_log_end_offset=20, lag_max_ms=LAG)
    assert state.lagging(now_ms=12_001, leader_log_end_offset=20, lag_max_ms=LAG)


def test_isr_state_maximal_and_commit() -> None:
    state = IsrState((1, 2), partition_epoch=4)
    state.pending = AlterIsrRequest(T0, 1, (1, 2, 3), 4)
    assert (state.isr, state.maximal, state.in_flight) == ((1, 2), (1, 2, 3), True)
    assert state.commit((1,), 3) is False  # older than held
    assert state.commit((1, 2, 3), 5) is True
    assert (state.isr, state.in_flight) == ((1, 2, 3), False)


def test_high_watermark_is_the_minimum_log_end_offset_of_the_isr(tmp_path: Path) -> None:
    sent: list[AlterIsrRequest] = []
    node = _node(tmp_path, sent)
    try:
        _lead(node)
        partition = node.replicas.partitions[T0]
        partition.append_as_leader(make_batch(10))
        assert partition.high_watermark == 0
        partition.replication.update_follower_fetch_state(OTHER, 6)
        assert partition.high_watermark == 0  # THIRD has not fetched
        partition.replication.update_follower_fetch_state(THIRD, 4)
        assert partition.high_watermark == 4
        partition.replication.update_follower_fetch_state(THIRD, 10)
        assert partition.high_watermark == 6
        partition.replication.update_follower_fetch_state(OTHER, 10)
        assert partition.high_watermark == 10
        assert sent == []
    finally:
        node.close()


def test_lagging_follower_is_shrunk_out_and_rejoins_once_caught_up(tmp_path: Path) -> None:
    sent: list[AlterIsrRequest] = []
    node = _node(tmp_path, sent)
    try:
        _lead(node, partition_epoch=7)
        partition = node.replicas.partitions[T0]
        clock = node.clock
        partition.append_as_leader(make_batch(5))
        partition.replication.update_follower_fetch_state(OTHER, 5)
        clock.advance(LAG)
        assert partition.replication.maybe_shrink_isr() is False  # THIRD is exactly at the limit
        partition.replication.update_follower_fetch_state(OTHER, 5)
        clock.advance(1)
        assert partition.replication.maybe_shrink_isr() is True
        assert sent == [AlterIsrRequest(T0, 1, (NODE, OTHER), 7)]
        # Pending: the HW still waits for THIRD (maximal ISR); no second change in flight.
        assert partition.high_watermark == 0
        assert partition.replication.maybe_shrink_isr() is False
        partition.replication.on_alter_isr_result(sent[0], (NODE, OTHER), 8)
        assert (partition.isr, partition.partition_epoch, partition.high_watermark) == (
            (NODE, OTHER),
            8,
            5,
        )
        assert node.replicas.under_replicated_partitions == 1
        # THIRD catches up: LEO >= HW and >= the epoch's start offset -> expansion asked.
        partition.replication.update_follower_fetch_state(THIRD, 3)
        assert len(sent) == 1
        partition.replication.update_follower_fetch_state(THIRD, 5)
        assert sent[1] == AlterIsrRequest(T0, 1, (NODE, OTHER, THIRD), 8)
        partition.replication.on_alter_isr_result(sent[1], (NODE, OTHER, THIRD), 9)
        assert partition.isr == (NODE, OTHER, THIRD)
        assert (node.replicas.isr_shrinks, node.replicas.isr_expands) == (1, 1)
        assert node.replicas.under_replicated_partitions == 0
    finally:
        node.close()


def test_a_follower_rejoins_only_from_the_current_epoch_start(tmp_path: Path) -> None:
    sent: list[AlterIsrRequest] = []
    node = _node(tmp_path, sent)
    try:
        _lead(node, isr=(NODE, OTHER), epoch=1)
        partition = node.replicas.partitions[T0]
        partition.append_as_leader(make_batch(4))
        _lead(node, isr=(NODE, OTHER), epoch=2, partition_epoch=1, version=3)
        assert partition.replication.leader_epoch_start_offset == 4
        assert partition.log.leader_epoch_cache.latest_epoch == 2
        partition.replication.update_follower_fetch_state(
            THIRD, 0
        )  # HW is 0, but before epoch 2's start
        assert sent == []
        partition.replication.update_follower_fetch_state(THIRD, 4)
        assert sent == [AlterIsrRequest(T0, 2, (NODE, OTHER, THIRD), 1)]
    finally:
        node.close()


def test_an_image_with_a_newer_partition_epoch_replaces_a_pending_change(tmp_path: Path) -> None:
    sent: list[AlterIsrRequest] = []
    node = _node(tmp_path, sent)
    try:
        _lead(node, partition_epoch=1)
        partition = node.replicas.partitions[T0]
        node.clock.advance(LAG + 1)
        assert partition.replication.maybe_shrink_isr() is True
        _lead(node, isr=(NODE, THIRD), partition_epoch=2, version=3)
        assert (partition.isr, partition.replication.isr_state.in_flight) == ((NODE, THIRD), False)
        partition.replication.on_alter_isr_result(sent[0], (NODE,), 2)  # late answer: ignored
        assert partition.isr == (NODE, THIRD)
    finally:
        node.close()


async def test_acks_all_completes_when_the_followers_fetch_past_the_batch(tmp_path: Path) -> None:
    sent: list[AlterIsrRequest] = []
    node = _node(tmp_path, sent)
    try:
        _lead(node)
        partition = node.replicas.partitions[T0]
        task = asyncio.create_task(
            node.produce.produce(produce_params((T0, make_batch(3)), acks=Acks.ALL))
        )
        await asyncio.sleep(0.01)
        assert not task.done()
        partition.replication.update_follower_fetch_state(OTHER, 3)
        await asyncio.sleep(0.01)
        assert not task.done()
        partition.replication.update_follower_fetch_state(THIRD, 3)
        [result] = await asyncio.wait_for(task, 5)
        assert (result.error, result.last_offset) == (ErrorCode.NONE, 2)
    finally:
        node.close()


async def test_isr_shrinking_below_min_while_waiting_is_not_enough_after_append(
    tmp_path: Path,
) -> None:
    sent: list[AlterIsrRequest] = []
    node = _node(tmp_path, sent)
    try:
        _lead(node, isr=(NODE, OTHER), configs={"min.insync.replicas": "2"})
        partition = node.replicas.partitions[T0]
        task = asyncio.create_task(
            node.produce.produce(produce_params((T0, make_batch(2)), acks=Acks.ALL))
        )
        await asyncio.sleep(0.01)
        node.clock.advance(LAG + 1)
        assert partition.replication.maybe_shrink_isr() is True
        partition.replication.on_alter_isr_result(sent[0], (NODE,), 1)
        [result] = await asyncio.wait_for(task, 5)
        assert result.error == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert partition.log_end_offset == 2  # written, as in Kafka
        # Now the ISR is below the minimum before appending: refused, nothing written.
        [refused] = await node.produce.produce(produce_params((T0, make_batch(2)), acks=Acks.ALL))
        assert refused.error == ErrorCode.NOT_ENOUGH_REPLICAS
        assert partition.log_end_offset == 2
    finally:
        node.close()


async def test_a_self_fenced_leader_refuses_produce_and_isr_changes(tmp_path: Path) -> None:
    sent: list[AlterIsrRequest] = []
    may_lead = [True]
    node = _node(tmp_path, sent, may_lead)
    try:
        _lead(node)
        may_lead[0] = False
        [result] = await node.produce.produce(produce_params((T0, make_batch())))
        assert result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
        node.clock.advance(LAG + 1)
        assert node.replicas.maybe_shrink_isr() == 0
        may_lead[0] = True
        [result] = await node.produce.produce(produce_params((T0, make_batch())))
        assert result.error == ErrorCode.NONE
    finally:
        node.close()


def test_list_offsets_waits_for_a_new_leaders_high_watermark(tmp_path: Path) -> None:
    sent: list[AlterIsrRequest] = []
    node = _node(tmp_path, sent)
    try:
        _lead(node, epoch=1)
        partition = node.replicas.partitions[T0]
        partition.append_as_leader(make_batch(5))  # not replicated: HW 0
        _lead(node, epoch=2, version=3)  # re-elected: the epoch starts at 5
        latest = ListOffsetsPartitionData(T0, OffsetSpec.LATEST)
        [result] = node.offsets.list_offsets([latest])
        assert result.error == ErrorCode.OFFSET_NOT_AVAILABLE
        partition.replication.update_follower_fetch_state(OTHER, 5)
        partition.replication.update_follower_fetch_state(THIRD, 5)
        [result] = node.offsets.list_offsets([latest])
        assert (result.error, result.offset) == (ErrorCode.NONE, 5)
    finally:
        node.close()
