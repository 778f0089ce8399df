"""Fetching from the closest replica (KIP-392, decision 0038) on real processes: three storage
nodes in racks a, b and c (node 1, 2, 3), replication factor 3, one gateway with
`replica.selector.class=rack-aware`.

A consumer with `client.rack=b` reads every acknowledged record, and the partitions node 2 only
follows are served by node 2 (its `riverlog_consumer_fetches` counter, scraped over HTTP, says
follower; their leaders served none); no record it gets is at or above the leader's high
watermark at that time; with the third replica paused (SIGSTOP) the leader's high watermark
stays put while acks=1 records reach node 2's log, and node 2 does not serve them until it
moves; a consumer without `client.rack` reads from the leaders only; a Spark batch read with
`kafka.client.rack=b` (the session's SparkSession, the `spark` fixture) reads every record once
and its fetches are served by node 2 the same way; and when node 2 is SIGKILLed the rack-b
consumer goes on from the leaders with nothing lost or repeated.
"""

from __future__ import annotations

import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replication_harness import ReplicationHarness, start_replication_cluster, wait_until

from riverlog.client import Consumer, ConsumerRecord, Producer, TopicPartition
from riverlog.cluster import unique_topic_name
from riverlog.common.errors import ErrorCode
from riverlog.v1 import admin_pb2, common_pb2

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

RACK_B_NODE = 2
PARTITIONS = 3
PER_PARTITION = 100
ALL = {1, 2, 3}
BOUNDED = {"delivery.timeout.ms": 90_000, "request.timeout.ms": 20_000}


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicationHarness]:
    cluster = start_replication_cluster(
        tmp_path_factory.mktemp("follower-fetch"),
        gateways=1,
        racks=["a", "b", "c"],
        gateway_config={"replica.selector.class": "rack-aware"},
    )
    try:
        yield ReplicationHarness(cluster)
    finally:
        cluster.stop()


def partitions(harness: ReplicationHarness, topic: str) -> list[common_pb2.PartitionState]:
    with harness.metadata() as stub:
        reply = stub.DescribeTopics(admin_pb2.DescribeTopicsRequest(names=[topic]), timeout=10)
    [described] = reply.topics
    assert described.error_code == ErrorCode.NONE, described.error_message
    return sorted(described.metadata.partitions, key=lambda p: p.partition)


def create_topic(harness: ReplicationHarness, prefix: str) -> str:
    name = unique_topic_name(prefix)
    harness.cluster.create_topic(name, PARTITIONS, 3)
    wait_until(
        lambda: all(set(p.isr) == ALL for p in partitions(harness, name)),
        what=f"every replica of {name} in sync",
    )
    return name


def produce(harness: ReplicationHarness, topic: str, tag: str) -> dict[tuple[int, int], bytes]:
    """PER_PARTITION records to each partition, acks=all; (partition, offset) -> value."""
    sent = {}
    with Producer({"bootstrap.servers": harness.cluster.gateway_address, **BOUNDED}) as p:
        futures = [
            (value, p.send(topic, value, partition=part))
            for part in range(PARTITIONS)
            for value in (b"%s-%d-%d" % (tag.encode(), part, i) for i in range(PER_PARTITION))
        ]
        p.flush()
    for value, future in futures:
        meta = future.result(60)
        sent[(meta.partition, meta.offset)] = value
    return sent


def high_watermarks(harness: ReplicationHarness, topic: str) -> dict[int, int]:
    """partition -> the high watermark its current leader reports now."""
    out = {}
    for state in partitions(harness, topic):
        if state.leader < 0 or not harness.cluster.storage(state.leader).alive:
            continue
        for log_dir in harness.describe_node(state.leader).log_dirs:
            for p in log_dir.partitions:
                if p.topic == topic and p.partition == state.partition:
                    out[state.partition] = p.high_watermark
    return out


class Reader:
    """A consumer of every partition of a topic from offset 0, checking each record against the
    leader's high watermark right after the poll that returned it."""

    def __init__(self, harness: ReplicationHarness, topic: str, rack: str) -> None:
        self.harness, self.topic = harness, topic
        settings = {"auto.offset.reset": "earliest", "fetch.max.wait.ms": 100}
        if rack:
            settings["client.rack"] = rack
        self.consumer = Consumer({"bootstrap.servers": harness.cluster.gateway_address, **settings})
        self.consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        self.records: list[ConsumerRecord] = []

    def read_until(self, want: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.records) < want:
            assert time.monotonic() < deadline, f"read {len(self.records)} of {want} records"
            got = [r for rs in self.consumer.poll(timeout_ms=500).values() for r in rs]
            if not got:
                continue
            hws = high_watermarks(self.harness, self.topic)
            for r in got:
                if r.partition in hws:
                    assert r.offset < hws[r.partition], "a record above the high watermark"
            self.records.extend(got)

    def close(self) -> None:
        self.consumer.close()


def served(harness: ReplicationHarness, topic: str) -> dict[tuple[int, int, str], float]:
    """(node, partition, leader|follower) -> consumer fetches of `topic` that node answered."""
    out: dict[tuple[int, int, str], float] = {}
    for process in harness.cluster.by_role("storage"):
        if not process.alive:
            continue
        assert process.metrics_url is not None and process.node_id is not None
        with urllib.request.urlopen(process.metrics_url, timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == "riverlog_consumer_fetches_total" and s.labels["topic"] == topic:
                    key = (process.node_id, int(s.labels["partition"]), s.labels["replica"])
                    out[key] = s.value
    return out


def check_exactly_once(records: list[ConsumerRecord], sent: dict[tuple[int, int], bytes]) -> None:
    got = [(r.partition, r.offset) for r in records]
    assert len(got) == len(set(got)), "a record was delivered twice"
    assert {(r.partition, r.offset): r.value for r in records} == sent


def test_a_rack_b_consumer_reads_everything_from_the_rack_b_follower(
    harness: ReplicationHarness,
) -> None:
    topic = create_topic(harness, "rack-b")
    leaders = {p.partition: p.leader for p in partitions(harness, topic)}
    followed = [p for p, leader in leaders.items() if leader != RACK_B_NODE]
    assert followed, f"node {RACK_B_NODE} leads every partition: {leaders}"
    sent = produce(harness, topic, "b")
    reader = Reader(harness, topic, "b")
    try:
        reader.read_until(len(sent))
    finally:
        reader.close()
    check_exactly_once(reader.records, sent)
    counts = served(harness, topic)
    for p in followed:
        assert counts.get((RACK_B_NODE, p, "follower"), 0) > 0, counts
        assert counts.get((leaders[p], p, "leader"), 0) == 0, counts
    for p in set(leaders) - set(followed):
        assert counts.get((RACK_B_NODE, p, "leader"), 0) > 0, counts


def test_a_consumer_without_a_rack_reads_from_the_leaders(harness: ReplicationHarness) -> None:
    topic = create_topic(harness, "no-rack")
    leaders = {p.partition: p.leader for p in partitions(harness, topic)}
    sent = produce(harness, topic, "n")
    reader = Reader(harness, topic, "")
    try:
        reader.read_until(len(sent))
    finally:
        reader.close()
    check_exactly_once(reader.records, sent)
    counts = served(harness, topic)
    assert not [k for k in counts if k[2] == "follower"], counts
    for p, leader in leaders.items():
        assert counts.get((leader, p, "leader"), 0) > 0, counts


@pytest.mark.spark
def test_a_spark_read_with_kafka_client_rack_reads_from_the_rack_b_follower(
    harness: ReplicationHarness, spark: Any
) -> None:
    """The Spark source's tasks send `kafka.client.rack` in their fetches: the partitions node 2
    follows are read from node 2, none from their leaders, each committed record once."""
    topic = create_topic(harness, "spark-rack-b")
    leaders = {p.partition: p.leader for p in partitions(harness, topic)}
    followed = [p for p, leader in leaders.items() if leader != RACK_B_NODE]
    assert followed, f"node {RACK_B_NODE} leads every partition: {leaders}"
    sent = produce(harness, topic, "spark")
    rows = (
        spark.read.format("riverlog")
        .option("kafka.bootstrap.servers", harness.cluster.gateway_address)
        .option("kafka.client.rack", "b")
        .option("subscribe", topic)
        .load()
        .select("partition", "offset", "value")
        .collect()
    )
    got = [(row.partition, row.offset) for row in rows]
    assert len(got) == len(set(got)), "a record was read twice"
    assert {(row.partition, row.offset): bytes(row.value) for row in rows} == sent
    counts = served(harness, topic)
    for p in followed:
        assert counts.get((RACK_B_NODE, p, "follower"), 0) > 0, counts
        assert counts.get((leaders[p], p, "leader"), 0) == 0, counts


def offsets_on(
    harness: ReplicationHarness, node: int, topic: str, partition: int
) -> tuple[int, int]:
    """(log end offset, high watermark) of the replica of topic-partition on `node`."""
    for log_dir in harness.describe_node(node).log_dirs:
        for p in log_dir.partitions:
            if p.topic == topic and p.partition == partition:
                return p.log_end_offset, p.high_watermark
    raise AssertionError(f"node {node} holds no replica of {topic}-{partition}")


def test_the_follower_never_serves_records_above_the_high_watermark(
    harness: ReplicationHarness,
) -> None:
    """The third replica paused (SIGSTOP, still in the ISR for replica.lag.time.max.ms) holds
    the leader's high watermark back while acks=1 records reach the rack-b follower's log: the
    follower has them but does not serve them until the high watermark passes them."""
    topic = create_topic(harness, "rack-b-hw")
    state = next(p for p in partitions(harness, topic) if p.leader != RACK_B_NODE)
    part, leader = state.partition, state.leader
    [third] = ALL - {leader, RACK_B_NODE}
    config = {"bootstrap.servers": harness.cluster.gateway_address, **BOUNDED}
    with Producer(config) as p:
        committed = [p.send(topic, b"c-%d" % i, partition=part) for i in range(50)]
        p.flush()
    assert [f.result(30).offset for f in committed] == list(range(50))
    reader = Reader(harness, topic, "b")
    try:
        reader.consumer.assign([TopicPartition(topic, part)])
        reader.read_until(50)
        harness.cluster.storage(third).pause()
        try:
            with Producer({**config, "acks": "1"}) as p:
                pending = [p.send(topic, b"u-%d" % i, partition=part) for i in range(50)]
                p.flush()
            assert [f.result(30).offset for f in pending] == list(range(50, 100))
            wait_until(
                lambda: offsets_on(harness, RACK_B_NODE, topic, part)[0] == 100,
                what="the acks=1 records in the rack-b follower's log",
            )
            held_back_polls = 0
            for _ in range(6):
                got = [r for rs in reader.consumer.poll(timeout_ms=300).values() for r in rs]
                if offsets_on(harness, leader, topic, part)[1] != 50:
                    break  # the paused replica left the ISR: the high watermark moved on
                assert not got, f"records above the high watermark 50: {[r.offset for r in got]}"
                held_back_polls += 1
            assert held_back_polls > 0, "the high watermark moved before any poll"
        finally:
            harness.cluster.storage(third).resume()
        reader.read_until(100)
    finally:
        reader.close()
    assert sorted(r.offset for r in reader.records) == list(range(100))
    assert served(harness, topic).get((leader, part, "leader"), 0) == 0


def test_the_rack_b_replica_killed_the_consumer_goes_on_from_the_leaders(
    harness: ReplicationHarness,
) -> None:
    topic = create_topic(harness, "rack-b-kill")
    leaders = {p.partition: p.leader for p in partitions(harness, topic)}
    followed = [p for p, leader in leaders.items() if leader != RACK_B_NODE]
    sent = produce(harness, topic, "before")
    reader = Reader(harness, topic, "b")
    try:
        reader.read_until(len(sent))
        before = served(harness, topic)
        assert all(before.get((RACK_B_NODE, p, "follower"), 0) > 0 for p in followed), before
        harness.cluster.storage(RACK_B_NODE).kill()
        # acks=all waits until node 2 leaves the ISR (replica.lag.time.max.ms), then goes on.
        sent.update(produce(harness, topic, "after"))
        reader.read_until(len(sent))
    finally:
        reader.close()
    check_exactly_once(reader.records, sent)
    after = served(harness, topic)
    new_leaders = {p.partition: p.leader for p in partitions(harness, topic)}
    for p in followed:
        leader = new_leaders[p]
        assert after.get((leader, p, "leader"), 0) > before.get((leader, p, "leader"), 0), after
