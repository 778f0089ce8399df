"""A reassignment survives failures (KIP-455): the active controller SIGKILLed mid-move (the new
controller reads the move from etcd and completes it), the joining replica SIGKILLed and
restarted mid-move, and the leader SIGKILLed and restarted mid-move (and, while node 3 is
paused, DescribeLogDirs names it and answers for the others). A producer writes with
acks=all throughout; every acknowledged record is read back once at its offset, the leaving node
deletes its copy and the target replicas' logs end byte for byte equal.

A move is held in progress by pausing a staying target replica (node 3) until it has left the
ISR (lag) while it stays registered (session timeout): the new replica copies and joins, but
the move cannot complete until node 3 is back in sync.

The last test kills the joining replica earlier, mid-copy (held out of the ISR by a follower
throttle), and is judged by the fault matrix's checker: the short variant of the matrix's
reassignment cases (`tests/fault/held_move.py`, `make faults`)."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from reassign_harness import AckedProducer, ReassignHarness, start_reassign_cluster, wait_until

from riverlog.client import AdminClient, TopicPartition

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fault"))
from checker import check  # tests/fault: the fault matrix's harness
from held_move import (
    assert_bytes_equal,
    kill_joiner_and_restart,
    lift_throttle,
    start_held_move,
    wait_copy_deleted,
    wait_moved,
)
from observers import HighWatermarkWatcher, read_back, wait_for_convergence
from workload import Workload

pytestmark = [pytest.mark.integration, pytest.mark.fault, pytest.mark.timeout(400)]


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReassignHarness]:
    """A cluster of this module's own: its tests kill and pause nodes. Thrown away at the
    end, as the fault tests' clusters: SIGKILLed by PID, no clean shutdown to wait out."""
    cluster = start_reassign_cluster(tmp_path_factory.mktemp("reassign-faults-cluster"))
    try:
        with ReassignHarness(cluster) as h:
            yield h
    finally:
        cluster.stop(grace=0.0)


@contextmanager
def held_move(harness: ReassignHarness, topic: str) -> Iterator[None]:
    """{1,2,3} → {1,3,4} in progress with node 4 in the ISR while node 3 is paused; node 3
    resumes at the end of the block."""
    harness.place(topic, (1, 2, 3))
    # A node the previous test paused or killed may still be registering again: a move to a
    # node that is not registered is refused (INVALID_REPLICA_ASSIGNMENT).
    wait_until(
        lambda: {1, 2, 3, 4} <= live_storage_nodes(harness) and 3 in harness.state(topic).isr,
        what="every storage node registered, node 3 in sync",
    )
    paused = harness.cluster.storage(3)
    paused.pause()
    try:
        wait_until(lambda: 3 not in harness.state(topic).isr, what="node 3 leaving the ISR")
        harness.reassign(topic, [1, 3, 4])
        wait_until(lambda: 4 in harness.state(topic).isr, what="node 4 joining the ISR")
        assert harness.moving(topic)
        yield
    finally:
        paused.resume()


def live_storage_nodes(harness: ReassignHarness) -> set[int]:
    return {n.node_id for n in harness.admin.describe_cluster().nodes if n.kind == "storage"}


def described_without(harness: ReassignHarness, topic: str, paused: int) -> None:
    """DescribeLogDirs while a storage node is paused (decision 0040): it is named with its
    error, the others answer with their replicas."""
    conf = {"bootstrap.servers": harness.cluster.gateway_address, "request.timeout.ms": 4000}
    with AdminClient(conf) as admin:
        result = admin.describe_log_dirs([topic])
    assert set(result.node_errors) == {paused}, result.node_errors
    tp = TopicPartition(topic, 0)
    assert {1, 4} <= set(result.replicas(tp)) and paused not in result.replicas(tp)
    assert all(info.size_bytes > 0 for info in result.replicas(tp).values())


def check_moved(harness: ReassignHarness, topic: str, producer: AckedProducer) -> None:
    """After the producer stopped: on {1,3,4}, node 2's copy gone, every acknowledged record
    once at its offset, equal logs."""
    harness.wait_replicas(topic, (1, 3, 4))
    wait_until(lambda: not harness.partition_dir(2, topic).exists(), what="node 2's copy gone")
    end = max(producer.acked.values()) + 1
    read = harness.read_all(topic, end)
    offsets = [o for o, _ in read]
    assert offsets == sorted(set(offsets)), "an offset read twice or out of order"
    by_value: dict[bytes, list[int]] = {}
    for offset, value in read:
        by_value.setdefault(value, []).append(offset)
    at = dict(read)
    for value, offset in producer.acked.items():
        assert by_value.get(value) == [offset], (
            f"{value!r} acknowledged at {offset}, which holds {at.get(offset)!r}; "
            f"read {len(read)} records up to {offsets[-1] if offsets else None}"
        )
    harness.wait_logs_equal(topic, (1, 3, 4))


def test_new_controller_completes_the_move(harness: ReassignHarness) -> None:
    topic = harness.create_topic("controller-killed")
    with AckedProducer(harness.cluster.gateway_address, topic) as producer:
        producer.wait_acked(100)
        with held_move(harness, topic):
            described_without(harness, topic, paused=3)
            before = harness.cluster.describe_cluster()
            harness.cluster.metadata(before.controller_id).kill(signal.SIGKILL)
            wait_until(
                lambda: (
                    (d := harness.cluster.describe_cluster()).controller_epoch
                    > before.controller_epoch
                    and d.controller_id != before.controller_id
                ),
                what="a new controller",
            )
            assert harness.moving(topic)  # read back from etcd by the new controller
        producer.wait_acked(len(producer.acked) + 100)
        harness.wait_replicas(topic, (1, 3, 4))
    assert producer.failed == 0, producer.errors[:3]
    check_moved(harness, topic, producer)


def test_joining_replica_killed_and_restarted(harness: ReassignHarness) -> None:
    topic = harness.create_topic("joiner-killed")
    with AckedProducer(harness.cluster.gateway_address, topic) as producer:
        producer.wait_acked(100)
        with held_move(harness, topic):
            joiner = harness.cluster.storage(4)
            joiner.kill(signal.SIGKILL)
            joiner.restart(timeout=120)
            assert TopicPartition(topic, 0) in harness.admin.list_partition_reassignments()
        producer.wait_acked(len(producer.acked) + 100)
        harness.wait_replicas(topic, (1, 3, 4))
    assert producer.failed == 0, producer.errors[:3]
    check_moved(harness, topic, producer)


def test_leader_killed_and_restarted(harness: ReassignHarness) -> None:
    topic = harness.create_topic("leader-killed")
    with AckedProducer(harness.cluster.gateway_address, topic) as producer:
        producer.wait_acked(100)
        with held_move(harness, topic):
            epoch = harness.state(topic).leader_epoch
            leader = harness.cluster.storage(1)
            leader.kill(signal.SIGKILL)
            wait_until(
                lambda: (
                    (p := harness.state(topic)).leader not in (-1, 1) and p.leader_epoch > epoch
                ),
                what="a new leader",
            )
            assert harness.moving(topic)
            leader.restart(timeout=120)
        producer.wait_acked(len(producer.acked) + 100)
        harness.wait_replicas(topic, (1, 3, 4))
    assert producer.failed == 0, producer.errors[:3]
    check_moved(harness, topic, producer)


def test_joining_replica_killed_mid_copy_resumes(harness: ReassignHarness) -> None:
    """Off a follower onto node 4 (or whichever node holds none of it), the joiner SIGKILLed
    while a throttle holds its copy out of the ISR, restarted: it copies on from its log, and
    once the throttle is lifted the move completes. acks=all throughout; the checker finds
    nothing lost, duplicated, reordered or seen above the high watermark."""
    cluster = harness.cluster
    topic = harness.create_topic("joiner-mid-copy")
    wait_until(lambda: live_storage_nodes(harness) == {1, 2, 3, 4}, what="every storage node")
    workload = Workload(cluster.gateway_address, topic, 1, producers=1, rate=200.0)
    watcher = HighWatermarkWatcher(cluster.gateway_address, topic, 1).start()
    try:
        workload.start()
        assert workload.wait_for_acks(100, 30), dict(workload.failures)
        move = start_held_move(cluster, topic, leave_leader=False)
        workload.mark_fault()
        held = kill_joiner_and_restart(cluster, move)
        lift_throttle(cluster, move)
        wait_moved(cluster, move)
        assert workload.wait_for_acks(50, 30, since=time.monotonic()), dict(workload.failures)
    finally:
        workload.stop()
        watcher.stop()
    wait_copy_deleted(cluster, move)
    read = read_back(cluster.gateway_address, topic, 1)
    logs = wait_for_convergence(cluster.data_dir, topic, 1, {0: move.target}, timeout=20)
    report = check(workload, read, logs, watcher, affected=[0])
    print(f"\n{report.summary(str(move))}; joiner killed holding {held} bytes")
    assert report.acked and not report.problems, "\n".join(
        [report.summary(str(move)), *report.problems]
    )
    assert_bytes_equal(cluster, move)
