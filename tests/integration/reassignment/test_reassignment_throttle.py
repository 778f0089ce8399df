"""Replication throttles (decision 0024) on real processes: `riverlog configs` refuses bad node
configs and changes nothing; `riverlog partitions reassign --throttle` rate-limits the copy of a
partition holding a few MiB to a new node, while a producer on another partition led by the
same node keeps getting acks=all acknowledgements; `--verify` then removes every throttle.

The bound on the copy is semantic, not a timing of performance: with the throttle the copy
cannot finish in less than about size / rate (asserted with a factor of two of slack), and the
bytes on the new replica never run ahead of rate x elapsed by more than the rate window's
allowance and two fetches."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from reassign_harness import AckedProducer, ReassignHarness, start_reassign_cluster, wait_until

from riverlog.client import Producer, TopicPartition
from riverlog.common.errors import ErrorCode
from riverlog.common.node_config import FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE
from riverlog.common.replication_throttle import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
)
from riverlog.v1 import admin_pb2

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(420)]

RATE = 512 * 1024  # bytes/s
WINDOW_SAMPLES = 3  # replication.quota.window.num: the rate's window is padded to 2 s
FETCH_MAX = 1_048_576  # replica.fetch.max.bytes
RECORD = b"x" * 60_000
RECORDS = 100  # about 6 MiB on disk


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReassignHarness]:
    cluster = start_reassign_cluster(
        tmp_path_factory.mktemp("throttle-cluster"),
        storage_config={"replication.quota.window.num": str(WINDOW_SAMPLES)},
        storage_nodes=3,
    )
    try:
        with ReassignHarness(cluster) as h:
            yield h
    finally:
        cluster.stop()


def riverlog(harness: ReassignHarness, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "riverlog.cli.main", *args]
    command += ["--bootstrap", harness.cluster.gateway_address]
    return subprocess.run(command, capture_output=True, text=True, timeout=150, check=False)


def log_size(harness: ReassignHarness, node_id: int, topic: str) -> int:
    directory = harness.partition_dir(node_id, topic)
    try:
        return sum(p.stat().st_size for p in directory.glob("*.log"))
    except FileNotFoundError:
        return 0


def set_rates(harness: ReassignHarness) -> dict[str, dict[str, str]]:
    """Node entity -> the throttle rates explicitly set on it."""
    described = harness.admin.describe_node_configs(all_nodes=True)
    return {
        "<default>" if node is None else str(node): {
            name: e.value for name, e in entries.items() if not e.is_default
        }
        for node, entries in described.items()
        if any(not e.is_default for e in entries.values())
    }


def test_bad_node_configs_are_refused_and_change_nothing(harness: ReassignHarness) -> None:
    ok = riverlog(
        harness,
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "2",
        "--add-config",
        f"{LEADER_THROTTLED_RATE}=1000",
    )
    assert ok.returncode == 0, ok.stderr
    for config in (f"{LEADER_THROTTLED_RATE}=-1", f"{FOLLOWER_THROTTLED_RATE}=fast", "nope=1"):
        refused = riverlog(
            harness,
            "configs",
            "alter",
            "--entity-type",
            "brokers",
            "--entity-name",
            "2",
            "--add-config",
            f"{LEADER_THROTTLED_RATE}=5,{config}",
        )
        assert refused.returncode == 1, config
        assert "INVALID_CONFIG" in refused.stderr, refused.stderr
    assert set_rates(harness) == {"2": {LEADER_THROTTLED_RATE: "1000"}}
    listed = riverlog(harness, "configs", "describe", "--entity-type", "brokers")
    assert listed.returncode == 0, listed.stderr
    assert "Configs for broker 2 are:" in listed.stdout
    assert LEADER_THROTTLED_RATE in listed.stdout and "1000" in listed.stdout
    described = riverlog(
        harness, "configs", "describe", "--entity-type", "brokers", "--entity-name", "2", "--json"
    )
    assert described.returncode == 0, described.stderr
    [entity] = json.loads(described.stdout)["entities"]
    assert entity["configs"] == [
        {"name": LEADER_THROTTLED_RATE, "value": "1000", "is_default": False}
    ]
    deleted = riverlog(
        harness,
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "2",
        "--delete-config",
        LEADER_THROTTLED_RATE,
    )
    assert deleted.returncode == 0, deleted.stderr
    assert set_rates(harness) == {}
    # one request with a topic the gateway refuses and a node entity: the node is still done
    request = admin_pb2.AlterConfigsRequest(
        topics=[admin_pb2.AlterConfigsRequest.Topic(name="bad name")],
        nodes=[
            admin_pb2.AlterConfigsRequest.Node(
                name="",
                ops=[admin_pb2.AlterConfigsRequest.Op(name=FOLLOWER_THROTTLED_RATE, value="7")],
            )
        ],
    )
    mixed = harness.admin._call(lambda s: s.AlterConfigs, request)
    assert [t.error_code for t in mixed.topics] == [ErrorCode.INVALID_TOPIC_EXCEPTION]
    assert [(n.name, n.error_code) for n in mixed.nodes] == [("", ErrorCode.NONE)]
    assert set_rates(harness) == {"<default>": {FOLLOWER_THROTTLED_RATE: "7"}}
    harness.admin.alter_node_configs({None: {FOLLOWER_THROTTLED_RATE: None}})
    assert set_rates(harness) == {}
    topic = harness.create_topic("throttle-bad-list", replication_factor=2)
    bad_list = riverlog(
        harness,
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        topic,
        "--add-config",
        f"{LEADER_THROTTLED_REPLICAS}=[0:1,0-2]",
    )
    assert bad_list.returncode == 1 and "INVALID_CONFIG" in bad_list.stderr
    assert LEADER_THROTTLED_REPLICAS not in harness.admin.describe_topics([topic])[topic].configs


def test_throttled_move_is_rate_limited_and_verify_clears_it(
    harness: ReassignHarness, tmp_path: Path
) -> None:
    moved = harness.create_topic("throttle-moved", replication_factor=2)
    other = harness.create_topic("throttle-other", replication_factor=2)
    harness.place(moved, (1, 2))
    harness.place(other, (1, 2))  # led by the same node as the moved partition
    with Producer(bootstrap_servers=harness.cluster.gateway_address, acks="all") as producer:
        for future in [producer.send(moved, RECORD, partition=0) for _ in range(RECORDS)]:
            future.result(60)
    size = wait_until(
        lambda: (s := log_size(harness, 1, moved)) >= RECORDS * len(RECORD) and s,
        what="the moved partition's data on its leader",
    )
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {"version": 1, "partitions": [{"topic": moved, "partition": 0, "replicas": [1, 3]}]}
        )
    )

    with AckedProducer(harness.cluster.gateway_address, other) as acks:
        acks.wait_acked(40)
        started = time.monotonic()
        executed = riverlog(
            harness,
            "partitions",
            "reassign",
            "--plan",
            str(plan),
            "--execute",
            "--throttle",
            str(RATE),
        )
        assert executed.returncode == 0, executed.stderr
        assert "throttle limit was set to 524288 B/s" in executed.stdout
        acked_at_start = len(acks.acked)
        # the throttle is in place: rates on every node of the move, lists on the topic
        rates = set_rates(harness)
        assert {n: rates.get(n) for n in ("1", "2", "3")} == {
            n: {LEADER_THROTTLED_RATE: str(RATE), FOLLOWER_THROTTLED_RATE: str(RATE)}
            for n in ("1", "2", "3")
        }
        configs = harness.admin.describe_topics([moved])[moved].configs
        assert configs[LEADER_THROTTLED_REPLICAS] == "0:1,0:2"
        assert configs[FOLLOWER_THROTTLED_REPLICAS] == "0:3"

        samples: list[tuple[float, int]] = []

        def completed() -> bool:
            samples.append((time.monotonic() - started, log_size(harness, 3, moved)))
            p = harness.state(moved)
            return not harness.moving(moved) and p.replicas == (1, 3) and set(p.isr) == {1, 3}

        wait_until(completed, 240, f"the throttled move of {moved}")
        took = time.monotonic() - started
        acked_during = len(acks.acked) - acked_at_start
    assert acks.failed == 0, acks.errors[:3]
    assert acked_during >= 20, f"only {acked_during} acks=all records acknowledged during the move"

    print(f"throttled move: {size} bytes in {took:.1f} s at {RATE} B/s; {acked_during} acks")
    # the copy was rate-limited: about size / rate at least, never far ahead of the rate
    assert took >= 0.5 * size / RATE, f"{size} bytes moved in {took:.1f} s at {RATE} B/s"
    allowance = RATE * (WINDOW_SAMPLES - 1) + 2 * FETCH_MAX
    ahead = max(copied - RATE * t for t, copied in samples)
    assert ahead <= allowance, f"the copy ran {ahead:.0f} bytes ahead of the rate: {samples}"

    verified = riverlog(harness, "partitions", "reassign", "--plan", str(plan), "--verify")
    assert verified.returncode == 0, verified.stderr
    assert "is completed" in verified.stdout and "Throttle was removed" in verified.stdout
    assert set_rates(harness) == {}
    configs = harness.admin.describe_topics([moved])[moved].configs
    assert LEADER_THROTTLED_REPLICAS not in configs
    assert FOLLOWER_THROTTLED_REPLICAS not in configs
    # and the copy is whole: the new replica holds what the leader holds
    harness.wait_logs_equal(moved, (1, 3))
    assert TopicPartition(moved, 0) not in harness.admin.list_partition_reassignments()
