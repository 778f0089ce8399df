"""A storage node with two log dirs, one of which fills up (a small tmpfs: root ignores
permissions, so a full filesystem is how a test makes a dir fail for real), under a steady
acks=all producer: the node takes that dir offline, reports the replicas on it in its
heartbeat, and the controller moves the leaderships of those partitions and takes the replicas
out of their ISR (decision 0022), while the partitions on the healthy dir stay led by the node
under the same leader epoch. Every acknowledged record is where its acknowledgement said.
Kafka's log_dir_failure_test, with several log dirs per broker."""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from riverlog.client import Consumer, Producer, RecordFuture, TopicPartition
from riverlog.cluster import LocalCluster
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import admin_pb2, common_pb2, metadata_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fault"))
from disk import SmallDisks  # tests/fault: tmpfs log dirs

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TOPIC = "partial-log-dir"
PARTITIONS = 12
MOVE_BOUND_S = 60.0  # the failed dir's leaderships have moved within this
# tmpfs allocates by page: a full one still takes writes into a log's last, partly used page,
# so records must be large enough for the next appends to need new pages.
VALUE_BYTES = 1000


def describe(cluster: LocalCluster) -> list[common_pb2.PartitionState]:
    with sync_channel(cluster.metadata_addresses[0]) as channel:
        stub = metadata_pb2_grpc.MetadataServiceStub(channel)
        reply = stub.DescribeTopics(admin_pb2.DescribeTopicsRequest(names=[TOPIC]), timeout=10)
    return sorted(reply.topics[0].metadata.partitions, key=lambda p: p.partition)


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[LocalCluster, SmallDisks, Path]]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs log dir needs root and mount(8)")
    local = LocalCluster(
        tmp_path / "cluster",
        storage_nodes=3,
        metadata_nodes=1,
        gateways=1,
        log_dirs_per_node=2,
        extra_config={
            "storage": {"replica.fetch.wait.max.ms": "200", "replica.fetch.backoff.ms": "200"},
            "metadata": {
                "broker.session.timeout.ms": "6000",
                "broker.heartbeat.interval.ms": "500",
                "auto.leader.rebalance.enable": "false",
            },
        },
    )
    disks = SmallDisks(16)
    failing = local.log_dirs(1)[1]
    try:
        disks.mount(failing)
    except Exception as exc:  # no tmpfs in this container
        pytest.skip(f"cannot mount a tmpfs: {exc}")
    try:
        local.start(timeout=120)
        yield local, disks, failing
    finally:
        local.stop()
        disks.unmount_all()


@pytest.mark.timeout(300)
def test_full_log_dir_moves_its_leaderships_and_only_those(cluster) -> None:
    local, disks, failing = cluster
    local.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
    before = describe(local)
    # Node 1 holds a replica of every partition, spread over its two dirs once it applied
    # the new topic (Kafka's placement: the dir with the fewest partitions).
    wait_for(
        lambda: all(
            any((d / f"{TOPIC}-{p}").is_dir() for d in local.log_dirs(1)) for p in range(PARTITIONS)
        ),
        60,
        "node 1's logs of every partition",
    )
    on_failing = {p for p in range(PARTITIONS) if (failing / f"{TOPIC}-{p}").is_dir()}
    failed = [p for p in before if p.leader == 1 and p.partition in on_failing]
    healthy = [p for p in before if p.leader == 1 and p.partition not in on_failing]
    assert failed and healthy, (on_failing, [(p.partition, p.leader) for p in before])

    sent: list[tuple[int, RecordFuture]] = []
    config = {
        "bootstrap.servers": local.bootstrap_servers,
        "acks": "all",
        "retry.backoff.ms": 50,
        "delivery.timeout.ms": 200_000,
        "request.timeout.ms": 10_000,
        "linger.ms": 2,
    }
    with Producer(config) as producer:

        def send(start: int, stop: int) -> None:
            for i in range(start, stop):
                value = (b"%06d|" % i).ljust(VALUE_BYTES, b"v")  # fills pages fast
                sent.append((i, producer.send(TOPIC, value, partition=i % PARTITIONS)))

        send(0, 600)
        producer.flush(timeout=120)
        disks.fill(failing)
        send(600, 1200)  # node 1's next writes to the full dir fail
        moved = wait_for(
            lambda: (
                (s := describe(local))
                and all(s[p.partition].leader not in (1, -1) for p in failed)
                and all(1 not in s[p.partition].isr for p in failed)
                and s
            ),
            MOVE_BOUND_S,
            f"leaders other than node 1 for {[p.partition for p in failed]}",
        )
        send(1200, 1800)
        producer.flush(timeout=180)
        metas = {i: f.result(0) for i, f in sent}

    for p in failed:
        assert moved[p.partition].leader_epoch > p.leader_epoch
    after = describe(local)
    for p in healthy:  # led by node 1 all along: no election touched them
        assert (after[p.partition].leader, after[p.partition].leader_epoch) == (1, p.leader_epoch)
    assert local.storage(1).alive  # one dir is still good: the node did not halt

    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    got = []
    with Consumer(bootstrap_servers=local.bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign(tps)
        for _ in range(400):
            for records in c.poll(timeout_ms=500).values():
                got.extend(records)
            if len(got) >= len(metas):
                break
    where = {int(r.value[:6]): (r.partition, r.offset) for r in got}
    lost = [i for i, m in metas.items() if where.get(i) != (m.partition, m.offset)]
    assert lost == []
