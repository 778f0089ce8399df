"""`riverlog log-dirs describe` and the sizes of `riverlog topics describe` against the session
cluster (decision 0040): Kafka's kafka-log-dirs.sh document with the produced bytes on every
replica, `--topic-list` / `--broker-list` filters, and a one-line error for an unknown topic.
And a tiered topic (the session cluster's nodes tier to a directory, tests/integration/
conftest.py): its remote size and local log start in `topics describe`, the leader's
`riverlog_remote_*` gauges, and SDK consumers reading it from offset 0 through the gateway."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sdk_flavours import SYNC, EventLoopThread, asyncio_sdk

from riverlog.client import Producer, TopicPartition
from riverlog.cluster import LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

LINES = [f"record-{i:04d}-" + "x" * 200 for i in range(50)]
PAYLOAD = sum(len(line) for line in LINES)


def log_dirs(riverlog, *args: str) -> dict:
    done = riverlog("log-dirs", "describe", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_log_dirs_describe_and_topic_sizes(riverlog, new_topic, expect_error) -> None:
    topic = new_topic(1, 2)
    done = riverlog("produce", topic, "--acks", "all", input="".join(f"{x}\n" for x in LINES))
    assert done.returncode == 0, done.stderr

    def replicas(document: dict) -> dict[int, dict]:
        return {
            b["broker"]: p
            for b in document["brokers"]
            for d in b["logDirs"]
            for p in d["partitions"]
            if p["partition"] == f"{topic}-0"
        }

    deadline = time.monotonic() + 30
    while True:  # the follower copies after the leader acknowledged
        document = log_dirs(riverlog, "--topic-list", topic)
        found = replicas(document)
        if len(found) == 2 and all(p["size"] >= PAYLOAD for p in found.values()):
            break
        assert time.monotonic() < deadline, document
        time.sleep(0.3)
    assert document["version"] == 1
    assert sorted(b["broker"] for b in document["brokers"]) == [1, 2, 3]
    assert all(b["error"] is None for b in document["brokers"])
    for p in found.values():
        assert (p["offsetLag"], p["isFuture"], p["remoteSize"]) == (0, False, 0)
        assert (p["logStartOffset"], p["localLogStartOffset"], p["logEndOffset"]) == (0, 0, 50)
    one = sorted(found)[0]
    only = log_dirs(riverlog, "--topic-list", topic, "--broker-list", str(one))
    assert [b["broker"] for b in only["brokers"]] == [one]
    assert replicas(only) == {one: found[one]}

    described = riverlog("topics", "describe", topic, "--json")
    assert described.returncode == 0, described.stderr
    [p0] = json.loads(described.stdout)[0]["partitions"]
    assert p0["size_bytes"] == found[p0["leader"]]["size"]
    assert (p0["remote_size_bytes"], p0["log_start_offset"], p0["local_log_start_offset"]) == (
        0,
        0,
        0,
    )
    text = riverlog("topics", "describe", topic)
    assert f"\tSize: {p0['size_bytes']}\tRemoteSize: 0\tLogStart: 0\tLocalLogStart: 0" in (
        text.stdout
    )

    expect_error(
        riverlog("log-dirs", "describe", "--topic-list", f"{topic}-nope"),
        "UNKNOWN_TOPIC_OR_PARTITION",
        f"{topic}-nope",
    )


TIERED_VALUES = [b"%04d|" % i + bytes([65 + i % 26]) * 300 for i in range(120)]  # ~37 KB


def leader_gauges(cluster: LocalCluster, leader: int, topic: str) -> dict[str, float]:
    """The leader's `riverlog_remote_*` samples for partition 0 of `topic`, by name."""
    nodes = [p for p in cluster.by_role("storage") if p.node_id == leader]
    assert len(nodes) == 1 and nodes[0].metrics_url is not None, (leader, nodes)
    node = nodes[0]
    with urllib.request.urlopen(node.metrics_url, timeout=10) as response:
        text = response.read().decode()
    labels = {"node_id": str(leader), "topic": topic, "partition": "0"}
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("riverlog_remote_") and s.labels == labels
    }


@pytest.mark.timeout(240)
def test_a_tiered_topic_shows_its_remote_size_and_reads_from_offset_zero(
    riverlog, new_topic, cluster: LocalCluster, sdk_loop: EventLoopThread
) -> None:
    """Closed segments are copied (the copy-lag gauge falls to 0 with closed segments still on
    the leader's disk), the oldest are deleted locally (local.retention.bytes=8192), and then:
    `topics describe` shows RemoteSize > 0 and LocalLogStart > LogStart = 0, the remote-size
    gauge agrees, and a consumer of either SDK flavour assigned at offset 0 gets every record
    with its offset and value, the remote ones first."""
    topic = new_topic(
        configs={
            "remote.storage.enable": "true",
            "segment.bytes": "4096",
            "local.retention.bytes": "8192",
        }
    )
    # Eight records (~2.6 KB) per request: a request's payload must fit in a 4 KB segment.
    # Timestamps are now, so retention.ms (7 days) keeps everything.
    futures = []
    with Producer({"bootstrap.servers": cluster.gateway_address}) as producer:
        for i in range(0, len(TIERED_VALUES), 8):
            futures += [producer.send(topic, v, partition=0) for v in TIERED_VALUES[i : i + 8]]
            producer.flush(30)
    offsets = [f.result(30).offset for f in futures]
    assert offsets == list(range(len(TIERED_VALUES))), offsets

    def describe() -> dict:
        done = riverlog("topics", "describe", topic, "--json")
        assert done.returncode == 0, done.stderr
        [p0] = json.loads(done.stdout)[0]["partitions"]
        return p0

    deadline = time.monotonic() + 60
    while True:
        p0 = describe()
        gauges = leader_gauges(cluster, p0["leader"], topic)
        local = sorted(cluster.data_dir.glob(f"data/storage-*/{topic}-0/*.log"))
        if (
            p0["remote_size_bytes"] > 0
            and p0["local_log_start_offset"] > p0["log_start_offset"]
            and gauges.get("riverlog_remote_copy_lag_bytes") == 0
            and gauges.get("riverlog_remote_log_size_bytes") == p0["remote_size_bytes"]
            and len(local) >= 2  # closed segments still local: lag 0 says they are copied
        ):
            break
        assert time.monotonic() < deadline, (p0, gauges, local)
        time.sleep(0.3)
    assert p0["log_start_offset"] == 0  # still readable, remotely
    text = riverlog("topics", "describe", topic).stdout
    assert (
        f"\tRemoteSize: {p0['remote_size_bytes']}\tLogStart: 0"
        f"\tLocalLogStart: {p0['local_log_start_offset']}"
    ) in text

    tp = TopicPartition(topic, 0)
    for sdk in (SYNC, asyncio_sdk(sdk_loop)):
        got: list[tuple[int, bytes | None]] = []
        with sdk.Consumer(bootstrap_servers=cluster.gateway_address) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            deadline = time.monotonic() + 60
            while len(got) < len(TIERED_VALUES):
                assert time.monotonic() < deadline, f"{len(got)} records read"
                for records in consumer.poll(timeout_ms=500).values():
                    got.extend((r.offset, r.value) for r in records)
        assert got == list(enumerate(TIERED_VALUES)), sdk
