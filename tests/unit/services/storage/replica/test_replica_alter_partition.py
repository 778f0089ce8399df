"""The AlterPartition sender (answers applied to partitions, retries, waiting for the image on
epoch mismatches) and the node's self-fence."""

from __future__ import annotations

from pathlib import Path

from storage_replica_testkit import NODE, OTHER, Node, image, make_node, topic

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.storage.fencing import SelfFence
from riverlog.services.storage.replica.alter_partition import (
    AlterIsrOutcome,
    AlterPartitionManager,
)
from riverlog.services.storage.replica.isr import AlterIsrRequest

T0 = TopicPartition("t", 0)
LAG = 1_000


class FakeController:
    def __init__(self) -> None:
        self.answers: list[list[AlterIsrOutcome] | RiverlogError] = []
        self.calls: list[list[AlterIsrRequest]] = []

    async def alter_partition(self, requests: list[AlterIsrRequest]) -> list[AlterIsrOutcome]:
        self.calls.append(requests)
        answer = self.answers.pop(0)
        if isinstance(answer, RiverlogError):
            raise answer
        return answer


def _shrinking(tmp_path: Path) -> tuple[Node, list[AlterIsrRequest]]:
    sent: list[AlterIsrRequest] = []
    node = make_node(
        tmp_path / "logs", ManualClock(), replica_lag_time_max_ms=LAG, alter_isr=sent.append
    )
    node.replicas.apply_image(
        image(topic("t", leaders=[NODE], epoch=3, replicas=[[NODE, OTHER]], partition_epoch=5))
    )
    node.clock.advance(LAG + 1)
    assert node.replicas.maybe_shrink_isr() == 1
    return node, sent


async def test_a_committed_answer_becomes_the_partition_state(tmp_path: Path) -> None:
    node, sent = _shrinking(tmp_path)
    controller = FakeController()
    manager = AlterPartitionManager(controller, node.replicas.partitions.get)
    controller.answers.append([AlterIsrOutcome(T0, ErrorCode.NONE, "", 3, (NODE,), 6)])
    try:
        assert await manager.send(sent) == []
        partition = node.replicas.partitions[T0]
        assert (
            partition.isr,
            partition.partition_epoch,
            partition.replication.isr_state.in_flight,
        ) == (
            (NODE,),
            6,
            False,
        )
    finally:
        node.close()


async def test_transient_failures_are_resent_while_still_pending(tmp_path: Path) -> None:
    node, sent = _shrinking(tmp_path)
    controller = FakeController()
    manager = AlterPartitionManager(controller, node.replicas.partitions.get)
    controller.answers.append(RiverlogError("no controller", ErrorCode.NOT_CONTROLLER))
    controller.answers.append([AlterIsrOutcome(T0, ErrorCode.REQUEST_TIMED_OUT, "slow")])
    try:
        assert await manager.send(sent) == sent
        assert await manager.send(sent) == sent
        assert node.replicas.partitions[T0].replication.isr_state.in_flight
    finally:
        node.close()


async def test_stale_partition_epoch_takes_the_answered_state_or_waits_for_the_image(
    tmp_path: Path,
) -> None:
    node, sent = _shrinking(tmp_path)
    controller = FakeController()
    manager = AlterPartitionManager(controller, node.replicas.partitions.get)
    partition = node.replicas.partitions[T0]
    controller.answers.append([AlterIsrOutcome(T0, ErrorCode.INVALID_UPDATE_VERSION, "stale")])
    controller.answers.append(
        [AlterIsrOutcome(T0, ErrorCode.INVALID_UPDATE_VERSION, "stale", 3, (NODE, OTHER), 9)]
    )
    try:
        assert await manager.send(sent) == []
        assert partition.replication.isr_state.pending is sent[0]  # waits for the image
        assert await manager.send(sent) == []
        assert (partition.isr, partition.partition_epoch) == ((NODE, OTHER), 9)
        assert not partition.replication.isr_state.in_flight
    finally:
        node.close()


async def test_a_controller_behind_our_partition_epoch_is_asked_again(tmp_path: Path) -> None:
    """INVALID_UPDATE_VERSION with an older partition epoch than the request's: the controller's
    image has not caught up with a change this node already saw (a reassignment's write, seen
    through another metadata instance). No image brings anything newer, so the change is
    resent rather than left pending for good; then the controller accepts it."""
    node, sent = _shrinking(tmp_path)
    controller = FakeController()
    manager = AlterPartitionManager(controller, node.replicas.partitions.get)
    partition = node.replicas.partitions[T0]
    [request] = sent
    behind = request.partition_epoch - 1
    controller.answers.append(
        [AlterIsrOutcome(T0, ErrorCode.INVALID_UPDATE_VERSION, "behind", 3, (NODE, OTHER), behind)]
    )
    controller.answers.append(
        [AlterIsrOutcome(T0, ErrorCode.NONE, "", 3, (NODE,), request.partition_epoch + 1)]
    )
    try:
        assert await manager.send(sent) == [request]  # sent again after the backoff
        assert partition.replication.isr_state.pending is request
        assert await manager.send(sent) == []
        assert (partition.isr, partition.partition_epoch) == ((NODE,), request.partition_epoch + 1)
        assert not partition.replication.isr_state.in_flight
    finally:
        node.close()


async def test_a_final_refusal_drops_the_pending_change(tmp_path: Path) -> None:
    node, sent = _shrinking(tmp_path)
    controller = FakeController()
    manager = AlterPartitionManager(controller, node.replicas.partitions.get)
    controller.answers.append([AlterIsrOutcome(T0, ErrorCode.INELIGIBLE_REPLICA, "no")])
    try:
        assert await manager.send(sent) == []
        partition = node.replicas.partitions[T0]
        assert (partition.isr, partition.replication.isr_state.in_flight) == ((NODE, OTHER), False)
    finally:
        node.close()


class FakeLease:
    def __init__(self) -> None:
        self.renewed_monotonic = 100.0
        self.lease_ttl_ms = 3_000


def test_self_fence_on_an_old_lease_and_until_a_newer_image() -> None:
    now = [101.0]
    version = [10]
    fence = SelfFence(lambda: version[0], lambda: now[0])
    assert fence.may_lead()  # not registered yet
    lease = FakeLease()
    fence.on_registered()
    fence.attach(lease)
    assert fence.may_lead()
    now[0] = 103.5  # 3.5 s since the last renewal, TTL 3 s: the lease may be gone
    assert not fence.may_lead()
    # Resumed: the heartbeat found the lease lapsed and registered again at image version 10.
    fence.on_registered()
    lease.renewed_monotonic = 103.6
    now[0] = 103.7
    assert not fence.may_lead()  # must first apply an image newer than version 10
    version[0] = 11
    assert fence.may_lead()


def test_self_fence_takes_the_image_version_at_registration_time() -> None:
    version = [10]
    fence = SelfFence(lambda: version[0], lambda: 100.0)
    fence.on_registered()
    lease = FakeLease()
    fence.attach(lease)
    fence.on_registered()  # registered again at version 10
    version[0] = 12  # images applied before the next produce
    assert fence.may_lead()
