"""A storage node started by hand, outside the launcher, as the README tells a user
(`python -m riverlog.services.storage --node-id N ... --metadata ...`), joins the running
cluster with its new id, receives a partition by reassignment and serves acks=all writes as an
ISR member; `riverlog partitions drain --node N` then empties it again, through the gateway
only, before it is stopped (by its PID)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from riverlog.client import AdminClient, Producer, TopicPartition
from riverlog.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
T = TypeVar("T")
NODE = 7


def wait_until(predicate: Callable[[], T], what: str, timeout_s: float = 60.0) -> T:
    deadline = time.monotonic() + timeout_s
    while not (last := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what} (last: {last!r})"
        time.sleep(0.2)
    return last


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("by-hand") / "c",
        storage_nodes=2,
        metadata_nodes=1,
        gateways=1,
        coordinators=1,
        quota_nodes=0,
    ) as local:
        yield local


@pytest.fixture
def hand_started(cluster: LocalCluster, tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """Storage node NODE, started the README's way; SIGTERM by its PID at the end."""
    ready = tmp_path / "storage.ready"
    log_dir = tmp_path / "logs"
    command = [sys.executable, "-m", "riverlog.services.storage", "--node-id", str(NODE)]
    command += ["--host", "127.0.0.1", "--port", "0", "--zero-copy-port", "0"]
    command += ["--log-dirs", str(log_dir), "--metadata", ",".join(cluster.metadata_addresses)]
    command += ["--ready-file", str(ready)]
    with open(tmp_path / "storage.log", "wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: ready.exists() or proc.poll() is not None, "the ready file")
        assert proc.poll() is None, (tmp_path / "storage.log").read_text()[-2000:]
        assert json.loads(ready.read_text())["address"]
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def test_node_started_by_hand_joins_takes_a_partition_and_is_drained(
    cluster: LocalCluster, hand_started: subprocess.Popen[bytes]
) -> None:
    with AdminClient(bootstrap_servers=cluster.gateway_address) as admin:

        def storage_ids() -> set[int]:
            return {n.node_id for n in admin.describe_cluster().nodes if n.kind == "storage"}

        wait_until(lambda: NODE in storage_ids(), "the new node registered")
        cluster.create_topic("by-hand", 1, 2, {"min.insync.replicas": "2"})
        tp = TopicPartition("by-hand", 0)

        def replicas() -> list[int]:
            [p] = admin.describe_topics(["by-hand"])["by-hand"].partitions
            return list(p.replicas) if set(p.replicas) == set(p.isr) else []

        # placement may already have used the new node: start from the launcher's nodes
        if NODE in wait_until(replicas, "by-hand-0 created, in sync"):
            admin.alter_partition_reassignments({tp: [1, 2]})
            wait_until(lambda: replicas() == [1, 2], "by-hand-0 on nodes 1 and 2")
        admin.alter_partition_reassignments({tp: [1, NODE]})
        wait_until(lambda: replicas() == [1, NODE], "by-hand-0 moved onto the new node, in sync")
        with Producer(bootstrap_servers=cluster.gateway_address, acks="all") as producer:
            # min.insync.replicas=2 on {leader, NODE}: acknowledged only with NODE in the ISR
            assert producer.send("by-hand", b"v", partition=0).result(60).offset == 0

        command = [sys.executable, "-m", "riverlog.cli.main", "partitions", "drain"]
        command += ["--node", str(NODE), "--bootstrap", cluster.gateway_address]
        drained = subprocess.run(command, capture_output=True, text=True, timeout=150)
        assert drained.returncode == 0, drained.stderr
        assert "holds none now" in drained.stderr
        for topic in admin.describe_topics(include_internal=True).values():
            assert all(NODE not in p.replicas for p in topic.partitions), topic
        hand_started.send_signal(signal.SIGTERM)
        assert hand_started.wait(30) == 0
        wait_until(lambda: NODE not in storage_ids(), "the drained node unregistered")
