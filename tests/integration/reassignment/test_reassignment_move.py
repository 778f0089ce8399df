"""Partition reassignment (KIP-455) with real processes: an RF 3 partition moved from {1,2,3} to
{2,3,4} while a producer writes with acks=all (every acknowledged record read back once at its
offset, node 1's copy deleted, the three replica logs byte for byte equal), a replication factor
change through the same mechanism, a cancel that restores the original replicas and deletes the
copy, Kafka's validation errors that change nothing, and a node drained under acks=all load."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from typing import Any

import pytest
from reassign_harness import AckedProducer, ReassignHarness, wait_until

from riverlog.client import AdminClient, TopicPartition
from riverlog.cluster import unique_topic_name
from riverlog.common.errors import ErrorCode, RiverlogError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_move_under_acks_all_load(harness: ReassignHarness) -> None:
    topic = harness.create_topic("move")
    leader_epoch = harness.place(topic, (1, 2, 3)).leader_epoch  # node 1 leads, and leaves
    with AckedProducer(harness.cluster.gateway_address, topic) as producer:
        producer.wait_acked(200)
        harness.reassign(topic, [2, 3, 4])
        harness.wait_replicas(topic, (2, 3, 4))
        at_move = len(producer.acked)
        producer.wait_acked(at_move + 200)
    assert producer.failed == 0, producer.errors[:3]
    after = harness.state(topic)
    assert after.leader in (2, 3, 4)
    assert after.leader_epoch == leader_epoch + 1  # node 1 led and left: one new epoch
    wait_until(
        lambda: not harness.partition_dir(1, topic).exists(), what="node 1 deleting its copy"
    )
    end = max(producer.acked.values()) + 1
    read = harness.read_all(topic, end)
    offsets = [o for o, _ in read]
    assert offsets == sorted(set(offsets)), "an offset read twice or out of order"
    by_value: dict[bytes, list[int]] = {}
    for offset, value in read:
        by_value.setdefault(value, []).append(offset)
    for value, offset in producer.acked.items():
        assert by_value.get(value) == [offset], f"{value!r} acknowledged at {offset}"
    harness.wait_logs_equal(topic, (2, 3, 4))


def test_replication_factor_change(harness: ReassignHarness) -> None:
    topic = harness.create_topic("factor")
    harness.reassign(topic, [1, 2, 3])
    harness.wait_replicas(topic, (1, 2, 3))
    harness.reassign(topic, [1, 2, 3, 4])
    harness.wait_replicas(topic, (1, 2, 3, 4))
    harness.reassign(topic, [4, 2])
    harness.wait_replicas(topic, (4, 2))
    for node in (1, 3):
        wait_until(
            lambda node=node: not harness.partition_dir(node, topic).exists(),
            what=f"node {node} deleting its copy",
        )


def test_cancel_restores_original_replicas_and_deletes_the_copy(harness: ReassignHarness) -> None:
    topic = harness.create_topic("cancel")
    harness.place(topic, (1, 2, 3))
    with AckedProducer(harness.cluster.gateway_address, topic) as producer:
        producer.wait_acked(100)
        # Node 3 paused: it leaves the ISR (lag) but stays registered (session timeout), so a
        # move to {1,3,4} is valid, node 4 copies and joins, and the move cannot complete.
        paused = harness.cluster.storage(3)
        paused.pause()
        try:
            wait_until(lambda: 3 not in harness.state(topic).isr, what="node 3 leaving the ISR")
            harness.reassign(topic, [1, 3, 4])
            tp = TopicPartition(topic, 0)
            move = harness.admin.list_partition_reassignments()[tp]
            assert (move.adding_replicas, move.removing_replicas) == ((4,), (2,))
            assert move.target == (1, 3, 4)
            described = harness.state(topic)  # DescribeTopics shows the move too (KIP-455)
            assert (described.adding_replicas, described.removing_replicas) == ((4,), (2,))
            wait_until(lambda: 4 in harness.state(topic).isr, what="node 4 joining the ISR")
            assert harness.moving(topic)
            assert harness.log_bytes(4, topic)
            [progress] = harness.admin.list_partition_reassignments([tp]).values()
            assert progress.bytes_copied > 0 and progress.bytes_remaining is not None
            assert {1, 2, 4} <= set(progress.replica_logs)  # node 3 is paused: not answering
            harness.reassign(topic, None)
            assert not harness.moving(topic)
            assert set(harness.state(topic).replicas) == {1, 2, 3}
            wait_until(
                lambda: not harness.partition_dir(4, topic).exists(),
                what="node 4 deleting its copy",
            )
        finally:
            paused.resume()
        producer.wait_acked(len(producer.acked) + 100)
    assert producer.failed == 0, producer.errors[:3]
    wait_until(lambda: set(harness.state(topic).isr) == {1, 2, 3}, what="node 3 back in sync")
    with pytest.raises(RiverlogError) as err:
        harness.reassign(topic, None)
    assert err.value.code == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


@pytest.mark.parametrize(
    ("target", "code"),
    [
        ([], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ([2, 2, 3], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ([2, 3, 99], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        ([4], ErrorCode.INVALID_REPLICATION_FACTOR),
    ],
)
def test_invalid_targets_change_nothing(
    harness: ReassignHarness, target: list[int], code: ErrorCode
) -> None:
    topic = harness.create_topic("invalid")
    before = harness.state(topic)
    with pytest.raises(RiverlogError) as err:
        harness.reassign(topic, target)
    assert err.value.code == code
    assert harness.state(topic) == before
    assert not harness.moving(topic)


def test_unknown_partition(harness: ReassignHarness) -> None:
    topic = harness.create_topic("unknown")
    outcomes = harness.admin.alter_partition_reassignments(
        {TopicPartition(topic, 5): [1, 2], TopicPartition("no-such-topic", 0): [1, 2]},
        raise_on_error=False,
    )
    assert {tp: e.code if e else None for tp, e in outcomes.items()} == {
        TopicPartition(topic, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        TopicPartition("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }


class IsrWatch:
    """Samples every partition's ISR of `topic` from a thread while a drain runs; the smallest
    ISR seen per partition (a sample, not a proof: the producer's acks=all is the proof)."""

    def __init__(self, harness: ReassignHarness, topic: str) -> None:
        self.harness, self.topic = harness, topic
        self.smallest: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="isr-watch", daemon=True)

    def __enter__(self) -> IsrWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        with AdminClient(bootstrap_servers=self.harness.cluster.gateway_address) as admin:
            while not self._stop.wait(0.1):
                for p in admin.describe_topics([self.topic])[self.topic].partitions:
                    seen = self.smallest.get(p.partition, len(p.isr))
                    self.smallest[p.partition] = min(seen, len(p.isr))


def partitions_on(harness: ReassignHarness, node: int) -> list[TopicPartition]:
    described = harness.admin.describe_topics(include_internal=True)
    return [
        TopicPartition(name, p.partition)
        for name, topic in described.items()
        for p in topic.partitions
        if node in p.replicas
    ]


def drain_cli(harness: ReassignHarness, *argv: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "riverlog.cli.main", "partitions", "drain", *argv]
    command += ["--bootstrap", harness.cluster.gateway_address, "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=150, check=False)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_drain_under_acks_all_load(harness: ReassignHarness) -> None:
    """`partitions drain` of a node holding replicas and leaderships of an RF 3 topic while an
    acks=all producer writes every partition: the node ends holding nothing, every
    acknowledged record is read once at its offset, and no ISR went below min.insync.replicas
    (2). The node stays marked as draining (it is still registered) until `--cancel`."""
    partitions = 4
    topic = unique_topic_name("drain")
    harness.cluster.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    harness.admin.elect_leaders("preferred", [TopicPartition(topic, p) for p in range(partitions)])
    state = harness.admin.describe_topics([topic])[topic].partitions
    node = state[0].leader
    assert sum(node in p.replicas for p in state) >= 3 and node > 0
    with AckedProducer(harness.cluster.gateway_address, topic, partitions) as producer:
        producer.wait_acked(200)
        on_node = partitions_on(harness, node)
        with IsrWatch(harness, topic) as isr:
            document = drain_cli(harness, "--node", str(node), "--timeout", "120")
        producer.wait_acked(len(producer.acked) + 200)
    assert producer.failed == 0, producer.errors[:3]
    assert partitions_on(harness, node) == []
    moved = {TopicPartition(m["topic"], m["partition"]) for m in document["moved"]}
    assert moved == set(on_node) and document["draining_nodes"] == [node]
    assert all(node not in m["target_replicas"] for m in document["moved"])
    assert isr.smallest and min(isr.smallest.values()) >= 2, isr.smallest
    for p in harness.admin.describe_topics([topic])[topic].partitions:
        assert len(p.replicas) == 3 and set(p.isr) == set(p.replicas), p
    for partition in range(partitions):
        acked = {v: o for v, o in producer.acked.items() if producer.partition_of(v) == partition}
        read = harness.read_all(topic, max(acked.values()) + 1, partition=partition)
        offsets = [o for o, _ in read]
        assert offsets == sorted(set(offsets)), "an offset read twice or out of order"
        by_value: dict[bytes, list[int]] = {}
        for offset, value in read:
            by_value.setdefault(value, []).append(offset)
        for value, offset in acked.items():
            assert by_value.get(value) == [offset], f"{value!r} acknowledged at {offset}"
    # still registered, so still marked: nothing may be placed on it; --cancel ends the mark
    now = harness.admin.describe_topics([topic])[topic].partitions[0].replicas
    with pytest.raises(RiverlogError) as err:
        harness.admin.alter_partition_reassignments({TopicPartition(topic, 0): [node, *now[:2]]})
    assert err.value.code == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "drained" in err.value.message
    cancelled = drain_cli(harness, "--node", str(node), "--cancel")
    assert cancelled["draining_nodes"] == [] and cancelled["cancelled"] == []
    assert harness.admin.describe_cluster().draining == ()
