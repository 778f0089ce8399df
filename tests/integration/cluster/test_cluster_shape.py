"""`riverlog cluster stop|start|add|remove` on a running cluster of real processes (issue 13
item 3), run as the CLI runs them: attached to the cluster through its state file. A stopped
storage node rejoins and acks=all writes that need it succeed; a node added later takes a
partition reassigned to it and is drained again by `remove`; a drain that would break a
replication factor is refused; a coordinator removed hands its offsets to the other, and a
coordinator added, then removed again, while a group consumes and commits takes the group's
offsets partition and gives it back with nothing lost or read twice past a commit."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest

from riverlog.client import (
    AdminClient,
    CommitFailedError,
    Consumer,
    Producer,
    RebalanceInProgressError,
    TopicPartition,
)
from riverlog.cluster import LocalCluster
from riverlog.common.cluster.image import OFFSETS_TOPIC, CoordinatorAssignment, group_partition
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.rpc.channel import sync_channel
from riverlog.services.metadata.controller.coordinators import plan_assignment
from riverlog.v1 import coordinator_pb2, gateway_pb2_grpc

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
T = TypeVar("T")
CLI = (sys.executable, "-m", "riverlog.cli.main", "cluster")


def wait_until(predicate: Callable[[], T], timeout_s: float = 60.0, what: str = "") -> T:
    """Poll `predicate` (errors count as not yet) until truthy, or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except (RiverlogError, OSError) as exc:
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture(scope="module")
def shaped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(
        tmp_path_factory.mktemp("shape") / "c",
        storage_nodes=2,
        metadata_nodes=1,
        gateways=1,
        coordinators=2,
        quota_nodes=1,
        # the one group here has one member: its (re)joins need not wait for others
        extra_config={"coordinator": {"group.initial.rebalance.delay.ms": "0"}},
    )
    try:
        cluster.start(timeout=120)
        yield cluster
    finally:
        # First from the state file, which knows what the CLI started; then this handle, which
        # would otherwise rewrite the state with its own, older PIDs.
        LocalCluster.attach(cluster.data_dir).stop()
        cluster.stop()


@pytest.fixture(scope="module")
def admin(shaped: LocalCluster) -> Iterator[AdminClient]:
    with AdminClient(bootstrap_servers=shaped.gateway_address) as client:
        yield client


def cli(cluster: LocalCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    """`riverlog cluster ...` in its own process, as a user runs it (the processes it starts
    outlive it)."""
    command = [*CLI, *argv, "--data-dir", str(cluster.data_dir)]
    return subprocess.run(command, capture_output=True, text=True, timeout=150, check=False)


def ok(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr


def storage_ids(admin: AdminClient) -> set[int]:
    return {n.node_id for n in admin.describe_cluster().nodes if n.kind == "storage"}


def replicas(admin: AdminClient, topic: str) -> tuple[int, ...]:
    return admin.describe_topics([topic])[topic].partitions[0].replicas


def test_stopped_storage_node_rejoins_and_acks_all_needs_it(
    shaped: LocalCluster, admin: AdminClient
) -> None:
    shaped.create_topic("rejoin", 1, 2, {"min.insync.replicas": "2"})
    log_dirs = LocalCluster.attach(shaped.data_dir).storage(2).spec.args
    ok(cli(shaped, "stop", "storage", "2", "--grace", "10"))
    wait_until(lambda: 2 not in storage_ids(admin), what="storage 2 unregistered")
    ok(cli(shaped, "start", "storage", "2"))
    restarted = LocalCluster.attach(shaped.data_dir).storage(2)
    assert restarted.alive and restarted.spec.args == log_dirs  # same id, same log dirs
    assert 2 in storage_ids(admin)
    with Producer(bootstrap_servers=shaped.gateway_address, acks="all") as producer:
        # min.insync.replicas=2 on 2 replicas: acknowledged only once node 2 is back in the ISR
        assert producer.send("rejoin", b"after", partition=0).result(90).offset >= 0


def test_added_storage_node_takes_a_partition_and_is_drained_on_remove(
    shaped: LocalCluster, admin: AdminClient
) -> None:
    ok(cli(shaped, "add", "storage", "--rack", "r9"))
    added = LocalCluster.attach(shaped.data_dir).by_role("storage")[-1]
    node = added.node_id or 0
    assert node == 3 and added.alive
    assert {n.node_id: n.rack for n in admin.describe_cluster().nodes if n.kind == "storage"}[
        node
    ] == "r9"
    shaped.create_topic("moved", 1, 1)
    admin.alter_partition_reassignments({TopicPartition("moved", 0): [node]})
    wait_until(lambda: replicas(admin, "moved") == (node,), what="moved-0 on the new node")

    acked: dict[int, bytes] = {}
    stop = threading.Event()

    def produce() -> None:  # acks=all throughout the drain, one record at a time
        with Producer(bootstrap_servers=shaped.gateway_address, acks="all") as producer:
            sent = 0
            while not stop.is_set():
                value = b"drain-%06d" % sent
                acked[producer.send("moved", value, partition=0).result(60).offset] = value
                sent += 1

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    try:
        wait_until(lambda: len(acked) >= 20, what="records acknowledged before the drain")
        ok(cli(shaped, "remove", "storage", str(node), "--drain-timeout", "90"))
        written = len(acked)
        wait_until(lambda: len(acked) >= written + 20, what="records acknowledged after it")
    finally:
        stop.set()
        writer.join(90)
    assert not writer.is_alive() and node not in replicas(admin, "moved")
    assert f"storage-{node}" not in LocalCluster.attach(shaped.data_dir).processes
    wait_until(lambda: node not in storage_ids(admin), what="drained node unregistered")
    assert read_all(shaped, TopicPartition("moved", 0), max(acked) + 1) == acked


def read_all(cluster: LocalCluster, tp: TopicPartition, end: int) -> dict[int, bytes]:
    """Every record of `tp` below offset `end`, by offset."""
    consumer = Consumer({"bootstrap.servers": cluster.gateway_address})
    out: dict[int, bytes] = {}
    try:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while len(out) < end:
            assert time.monotonic() < deadline, f"read {len(out)} of {end}"
            for records in consumer.poll(timeout_ms=200).values():
                out.update((r.offset, r.value) for r in records if r.offset < end)
    finally:
        consumer.close()
    return out


def test_drain_refused_when_the_rest_cannot_hold_the_replication_factor(
    shaped: LocalCluster, admin: AdminClient
) -> None:
    live = sorted(storage_ids(admin))
    shaped.create_topic("full", 1, len(live))
    refused = cli(shaped, "remove", "storage", str(live[0]))
    assert refused.returncode == 1 and "cannot drain" in refused.stderr, refused.stderr
    assert LocalCluster.attach(shaped.data_dir).storage(live[0]).alive
    assert not admin.list_partition_reassignments()


def coordinators_of(cluster: LocalCluster, groups: list[str]) -> dict[str, int]:
    """Each group's coordinator instance, from the gateway's FindCoordinator."""
    stub = gateway_pb2_grpc.GatewayStub(sync_channel(cluster.gateway_address))  # type: ignore[no-untyped-call]
    found = stub.FindCoordinator(coordinator_pb2.FindCoordinatorRequest(keys=groups), timeout=10)
    return {c.key: c.node_id for c in found.coordinators if c.error_code == ErrorCode.NONE}


def test_removed_coordinator_hands_committed_offsets_to_the_other(
    shaped: LocalCluster, admin: AdminClient
) -> None:
    shaped.create_topic("offsets-kept", 1, 1)
    tp = TopicPartition("offsets-kept", 0)
    groups = {f"shape-group-{i}": 100 + i for i in range(8)}
    for group, offset in groups.items():
        admin.alter_group_offsets(group, {tp: offset})
    owners = coordinators_of(shaped, list(groups))
    assert set(owners.values()) == {1, 2}  # groups on both, so some move
    ok(cli(shaped, "remove", "coordinator", "1", "--grace", "15"))
    assert [p.node_id for p in LocalCluster.attach(shaped.data_dir).by_role("coordinator")] == [2]
    wait_until(
        lambda: coordinators_of(shaped, list(groups)) == dict.fromkeys(groups, 2),
        what="every group on coordinator 2",
    )
    for group, offset in groups.items():
        read = wait_until(lambda g=group: admin.list_group_offsets(g), what=f"{group}'s offsets")
        assert read[tp].offset == offset


def single_coordinator(cluster: LocalCluster) -> int:
    """Leave one coordinator running (after the test above only one runs; alone, two do)."""
    running = [p for p in LocalCluster.attach(cluster.data_dir).by_role("coordinator") if p.alive]
    for extra in running[:-1]:
        ok(cli(cluster, "remove", "coordinator", str(extra.node_id)))
    return running[-1].node_id or 0


def groups_moved_and_kept(admin: AdminClient, owner: int) -> tuple[str, str]:
    """A group whose `__consumer_offsets` partition moves when a second coordinator joins
    `owner`, alone until then, and one whose partition stays (the controller's planner moves
    the excess of the one owner: its highest partitions)."""
    count = len(admin.describe_topics([OFFSETS_TOPIC])[OFFSETS_TOPIC].partitions)
    held = {p: CoordinatorAssignment(p, owner, 1, 0) for p in range(count)}
    plan = plan_assignment(count, held, [owner, owner + 1])
    moved = {a.partition for a in plan if a.coordinator_id == owner + 1}
    names = [f"live-group-{i}" for i in range(100)]
    group = next(n for n in names if group_partition(n, count) in moved)
    kept = next(n for n in names if group_partition(n, count) not in moved)
    return group, kept


def group_state(admin: AdminClient, group: str) -> tuple[str, int, tuple[str, ...]]:
    """The group's state, generation and member ids, as its coordinator describes it."""
    described = admin.describe_groups([group])[group]
    return described.state, described.generation_id, tuple(m.member_id for m in described.members)


def test_group_consuming_while_a_coordinator_is_added_then_removed_reads_nothing_behind_a_commit(
    shaped: LocalCluster, admin: AdminClient
) -> None:
    """A group consumes what a producer keeps writing and commits after every poll while
    `cluster add coordinator` starts a second instance, which takes half of the first one's
    `__consumer_offsets` partitions, the group's among them; then while that new owner is
    removed again. At both moves the committed offset and the group (state, generation,
    member) come through; no commit goes backwards, nothing is read behind a commit, and
    every record written is consumed."""
    first = single_coordinator(shaped)
    group, kept = groups_moved_and_kept(admin, first)
    wait_until(
        lambda: coordinators_of(shaped, [group, kept]) == {group: first, kept: first},
        what=f"every group on coordinator {first}",
    )
    shaped.create_topic("live-group", 1, 1)
    tp = TopicPartition("live-group", 0)
    producer = Producer(bootstrap_servers=shaped.gateway_address, acks="all")
    consumer = Consumer(
        {
            "bootstrap.servers": shaped.gateway_address,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "max.poll.records": 10,
            "session.timeout.ms": 10_000,
            "heartbeat.interval.ms": 300,
        }
    )
    sent, committed, seen = 0, 0, []
    adder: subprocess.Popen[str] | None = None
    remover: subprocess.Popen[str] | None = None
    added = moved_at = 0
    before: tuple[str, int, tuple[str, ...]] | None = None
    producing = True
    deadline = time.monotonic() + 150
    try:
        consumer.subscribe(["live-group"])
        while producing or committed < sent:
            assert time.monotonic() < deadline, f"committed {committed} of {sent}"
            if producing and sent - committed < 100:  # a bounded backlog, written throughout
                producer.send_many("live-group", [b"%d" % i for i in range(sent, sent + 5)])
                sent += 5
            for records in consumer.poll(timeout_ms=100).values():
                for record in records:
                    assert record.offset >= committed, "read again behind a commit"
                    seen.append(record.offset)
            if adder is None and len(seen) >= 100:
                before = group_state(admin, group)
                assert before[0] == "Stable" and len(before[2]) == 1, before
                adder = subprocess.Popen(
                    [*CLI, "add", "coordinator", "--data-dir", str(shaped.data_dir)],
                    stderr=subprocess.PIPE,
                    text=True,
                )
            elif adder is not None and not added and adder.poll() is not None:
                err = adder.communicate()[1]  # closes the pipe
                assert adder.returncode == 0, err
                added = LocalCluster.attach(shaped.data_dir).by_role("coordinator")[-1].node_id or 0
                assert added and added != first
            elif added and not moved_at and coordinators_of(shaped, [group]).get(group) == added:
                moved_at = max(committed, 1)
                assert coordinators_of(shaped, [kept])[kept] == first
                offsets = wait_until(lambda: admin.list_group_offsets(group), what="offsets")
                assert offsets[tp].offset == committed, "the new owner lost the last commit"
                assert group_state(admin, group) == before, "the group changed with its owner"
            elif moved_at and remover is None and committed >= moved_at + 50:
                remover = subprocess.Popen(
                    [*CLI, "remove", "coordinator", str(added), "--data-dir", str(shaped.data_dir)],
                    stderr=subprocess.PIPE,
                    text=True,
                )
            elif remover is not None and producing and remover.poll() is not None:
                err = remover.communicate()[1]
                assert remover.returncode == 0, err
                wait_until(
                    lambda: coordinators_of(shaped, [group]).get(group) == first,
                    what=f"{group} back on coordinator {first}",
                )
                offsets = wait_until(lambda: admin.list_group_offsets(group), what="offsets")
                assert offsets[tp].offset == committed, "the old owner lost the last commit"
                assert group_state(admin, group) == before, "the group changed with its owner"
                producing = False
                producer.flush(60)
            if tp not in consumer.assignment():
                continue
            position = consumer.position(tp)
            try:
                consumer.commit_sync({tp: position})
            except (RebalanceInProgressError, CommitFailedError):
                continue  # the group is moving: the next poll rejoins, then commit again
            assert position >= committed, "commit went backwards"
            committed = position
    finally:
        consumer.close()
        producer.close()
        for proc in (adder, remover):
            if proc is not None:
                proc.communicate(timeout=60)
    assert committed == sent and set(seen) == set(range(sent))
    assert admin.list_group_offsets(group)[tp].offset == sent


def test_crashed_storage_node_comes_back_with_its_id_and_log_dirs(
    shaped: LocalCluster, admin: AdminClient
) -> None:
    shaped.create_topic("crash", 1, 2)
    with Producer(bootstrap_servers=shaped.gateway_address, acks="all") as producer:
        producer.send("crash", b"before", partition=0).result(60)
    before = LocalCluster.attach(shaped.data_dir).storage(1)
    before.kill(signal.SIGKILL)
    ok(cli(shaped, "restart", "storage", "1"))
    after = LocalCluster.attach(shaped.data_dir).storage(1)
    assert after.pid != before.pid and after.spec.args == before.spec.args
    assert 1 in storage_ids(admin)
    wait_until(
        lambda: set(admin.describe_topics(["crash"])["crash"].partitions[0].isr) == {1, 2},
        what="node 1 back in crash-0's ISR",
    )


def test_every_other_kind_is_added_restarted_and_removed(
    shaped: LocalCluster, admin: AdminClient
) -> None:
    for kind in ("gateway", "quota", "coordinator"):
        ok(cli(shaped, "add", kind))
    state = LocalCluster.attach(shaped.data_dir)
    added = {kind: state.by_role(kind)[-1] for kind in ("gateway", "quota", "coordinator")}
    assert all(p.alive and (p.node_id or 0) >= 2 for p in added.values())
    for kind in ("metadata", "gateway", "quota"):
        ok(cli(shaped, "restart", kind, "1"))
    kinds = {(n.kind, n.node_id) for n in admin.describe_cluster().nodes}
    assert {(k, p.node_id) for k, p in added.items()} <= kinds
    for kind, proc in added.items():
        ok(cli(shaped, "remove", kind, str(proc.node_id)))
        assert not proc.alive
    wait_until(
        lambda: (
            not {(n.kind, n.node_id) for n in admin.describe_cluster().nodes}
            & {(k, p.node_id) for k, p in added.items()}
        ),
        what="removed instances unregistered",
    )
    last = cli(shaped, "remove", "quota", "1")
    assert last.returncode == 1 and "last running quota" in last.stderr, last.stderr


def test_down_then_up_resume_brings_back_the_shape_reached(
    shaped: LocalCluster, admin: AdminClient
) -> None:
    ok(cli(shaped, "add", "storage"))
    added = LocalCluster.attach(shaped.data_dir).by_role("storage")[-1]
    node = added.node_id or 0
    shaped.create_topic("resumed", 1, 1)
    admin.alter_partition_reassignments({TopicPartition("resumed", 0): [node]})
    wait_until(lambda: replicas(admin, "resumed") == (node,), what="resumed-0 on the new node")
    with Producer(bootstrap_servers=shaped.gateway_address, acks="all") as producer:
        assert producer.send("resumed", b"before", partition=0).result(60).offset == 0

    ok(cli(shaped, "down"))
    assert not LocalCluster.attach(shaped.data_dir).running
    ok(cli(shaped, "up", "--resume"))
    back = LocalCluster.attach(shaped.data_dir)
    assert back.storage(node).alive and back.storage(node).spec.args == added.spec.args
    assert node in storage_ids(admin)
    with Producer(bootstrap_servers=shaped.gateway_address, acks="all") as producer:
        # the new node's log dir came back with it: the next record follows the first
        assert producer.send("resumed", b"after", partition=0).result(90).offset == 1


def test_metadata_instance_added_then_the_controller_removed_and_nothing_restarts(
    shaped: LocalCluster, admin: AdminClient
) -> None:
    before = {p.name: p.pid for p in LocalCluster.attach(shaped.data_dir).processes.values()}
    old = admin.describe_cluster().controller_id
    ok(cli(shaped, "add", "metadata"))
    new = LocalCluster.attach(shaped.data_dir).by_role("metadata")[-1].node_id or 0
    assert new != old
    wait_until(
        lambda: {i[0] for i in admin.describe_cluster().metadata_instances} == {old, new},
        what="both metadata instances live",
    )
    ok(cli(shaped, "remove", "metadata", str(old)))
    # every process was given only the old instance in --metadata; they learned the new one
    # from their Watch stream, and its election made it the controller
    wait_until(lambda: admin.describe_cluster().controller_id == new, what="new controller")
    shaped.create_topic("after-metadata-move", 1, 1)
    with Producer(bootstrap_servers=shaped.gateway_address, acks="all") as producer:
        assert producer.send("after-metadata-move", b"v", partition=0).result(60).offset == 0
    after = LocalCluster.attach(shaped.data_dir)
    assert [p.node_id for p in after.by_role("metadata")] == [new]
    assert all(
        after.processes[name].pid == pid for name, pid in before.items() if name in after.processes
    ), "a process was restarted"
    last = cli(shaped, "remove", "metadata", str(new))
    assert last.returncode == 1 and "last running metadata" in last.stderr, last.stderr
