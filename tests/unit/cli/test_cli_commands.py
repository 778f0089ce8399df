"""The command bodies against stand-ins for the SDK clients: the console producer's line
splitting and all-or-nothing exit, the console consumer's start positions, stop conditions and
output format, and the topic and cluster status documents."""

from __future__ import annotations

import argparse
import io
from collections import defaultdict

import pytest

from riverlog.cli.commands import cluster as cluster_cmd
from riverlog.cli.commands import consume as consume_cmd
from riverlog.cli.commands import produce as produce_cmd
from riverlog.cli.commands.topics import topic_json, topic_text
from riverlog.cli.console import CliError
from riverlog.cli.main import build_parser
from riverlog.client import ConsumerRecord, TopicPartition
from riverlog.client.admin import ConfigEntry, PartitionInfo, TopicDescription
from riverlog.client.log_dirs_admin import LogDirDescription, LogDirs, ReplicaInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.v1 import admin_pb2, common_pb2

# ---- produce --------------------------------------------------------------------------------


def test_split_line() -> None:
    assert produce_cmd.split_line(b"k:v:w\n", b":", 1) == (b"k", b"v:w")
    assert produce_cmd.split_line(b"value\r\n", None, 1) == (None, b"value")
    assert produce_cmd.split_line(b":v\n", b":", 1) == (b"", b"v")
    assert produce_cmd.split_line(b"last-line-without-newline", None, 1) == (
        None,
        b"last-line-without-newline",
    )
    with pytest.raises(CliError, match="line 7 has no key separator"):
        produce_cmd.split_line(b"novalue\n", b":", 7)


def test_read_records_numbers_lines() -> None:
    stream = io.BytesIO(b"a=1\nb=2\nbad\n")
    records = produce_cmd.read_records(stream, "=")
    assert next(records) == (b"a", b"1")
    assert next(records) == (b"b", b"2")
    with pytest.raises(CliError, match="line 3"):
        next(records)


class FakeProducer:
    """Completes every send at flush(); records whose value is in `fail` fail."""

    def __init__(self, fail: set[bytes] = frozenset(), drop: bool = False) -> None:
        self.fail = fail
        self.drop = drop
        self.sent: list[tuple[str, bytes, bytes | None, int | None]] = []
        self.pending: list[tuple[bytes, object]] = []
        self.flushed = False

    def send(self, topic, value, key=None, partition=None, callback=None):
        self.sent.append((topic, value, key, partition))
        self.pending.append((value, callback))

    def flush(self, timeout=None) -> None:
        self.flushed = True
        for value, callback in self.pending:
            if self.drop:
                continue
            if value in self.fail:
                callback(None, RiverlogError("no", ErrorCode.NOT_ENOUGH_REPLICAS))
            else:
                callback(object(), None)
        self.pending.clear()


def test_produce_sends_every_record_and_checks_every_outcome() -> None:
    producer = FakeProducer()
    records = [(b"k1", b"v1"), (None, b"v2")]
    assert produce_cmd.produce(producer, "t", records, partition=2) == 2
    assert producer.sent == [("t", b"v1", b"k1", 2), ("t", b"v2", None, 2)]
    assert producer.flushed


def test_produce_raises_the_first_failure_after_flushing() -> None:
    producer = FakeProducer(fail={b"v2", b"v3"})
    with pytest.raises(RiverlogError) as info:
        produce_cmd.produce(producer, "t", [(None, b"v1"), (None, b"v2"), (None, b"v3")], None)
    assert info.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert producer.flushed


def test_produce_fails_when_an_outcome_is_missing() -> None:
    with pytest.raises(CliError, match="only 0 of 1"):
        produce_cmd.produce(FakeProducer(drop=True), "t", [(None, b"v")], None)


def test_produce_flushes_what_was_sent_before_a_bad_line() -> None:
    producer = FakeProducer()
    records = produce_cmd.read_records(io.BytesIO(b"a:1\nbad\n"), ":")
    with pytest.raises(CliError, match="line 2"):
        produce_cmd.produce(producer, "t", records, None)
    assert producer.flushed and len(producer.sent) == 1


def test_producer_config_uses_kafka_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIVERLOG_BOOTSTRAP", "127.0.0.1:9092")
    args = build_parser().parse_args(
        ["produce", "t", "--acks", "1", "--compression", "zstd", "--producer-property",
         "linger.ms=50", "--client-id", "cli"]
    )  # fmt: skip
    conf = produce_cmd.producer_config(args)
    assert conf["bootstrap.servers"] == "127.0.0.1:9092"
    assert conf["client.id"] == "cli" and conf["acks"] == "1"
    assert conf["compression.type"] == "zstd"
    assert conf["linger.ms"] == "50"  # the explicit property wins over --linger-ms


# ---- consume --------------------------------------------------------------------------------


def record(partition: int, offset: int, value: bytes | None, key: bytes | None = None):
    return ConsumerRecord("t", partition, offset, 1000 + offset, 0, key, value, [])


class FakeConsumer:
    """Partitions as lists of records; poll() returns what lies past each position."""

    def __init__(self, logs: dict[int, list[ConsumerRecord]], per_poll: int = 2) -> None:
        self.logs = logs
        self.positions: dict[TopicPartition, int] = {}
        self.per_poll = per_poll
        self.polls = 0

    def end_offsets(self, tps):
        return {tp: len(self.logs[tp.partition]) for tp in tps}

    def position(self, tp):
        return self.positions[tp]

    def seek(self, tp, offset):
        self.positions[tp] = offset

    def seek_to_beginning(self, *tps):
        for tp in tps:
            self.positions[tp] = 0

    def seek_to_end(self, *tps):
        for tp in tps:
            self.positions[tp] = len(self.logs[tp.partition])

    def offsets_for_times(self, timestamps):
        out = {}
        for tp, ts in timestamps.items():
            hits = [r for r in self.logs[tp.partition] if r.timestamp >= ts]
            out[tp] = type("OT", (), {"offset": hits[0].offset})() if hits else None
        return out

    def poll(self, timeout_ms=0):
        self.polls += 1
        out = defaultdict(list)
        for tp, position in self.positions.items():
            batch = self.logs[tp.partition][position : position + self.per_poll]
            if batch:
                out[tp] = batch
                self.positions[tp] = position + len(batch)
        return dict(out)


def consume_args(*extra: str) -> argparse.Namespace:
    return build_parser().parse_args(["consume", "t", *extra])


def tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition("t", p) for p in partitions]


def run_consume(consumer: FakeConsumer, args: argparse.Namespace, partitions=(0, 1)) -> bytes:
    out = io.BytesIO()
    consume_cmd.start_positions(consumer, tps(*partitions), args)
    consume_cmd.consume(consumer, tps(*partitions), args, out)
    return out.getvalue()


LOGS = {
    0: [record(0, 0, b"a", b"k1"), record(0, 1, b"b", b"k2"), record(0, 2, None, b"k1")],
    1: [record(1, 0, b"c"), record(1, 1, b"d")],
}


def test_from_beginning_stops_at_the_end_offsets() -> None:
    out = run_consume(FakeConsumer(LOGS), consume_args("--from-beginning"))
    assert sorted(out.splitlines()) == [b"a", b"b", b"c", b"d", b"null"]


def test_default_start_is_the_end_so_nothing_is_printed() -> None:
    consumer = FakeConsumer(LOGS)
    assert run_consume(consumer, consume_args()) == b""
    assert consumer.polls == 0  # already at the end: no poll at all


def test_offset_of_one_partition_and_max_messages() -> None:
    args = consume_args("--offset", "1", "--partition", "0", "--print-offset")
    assert (
        run_consume(FakeConsumer(LOGS), args, partitions=(0,)) == b"Offset:1\tb\nOffset:2\tnull\n"
    )
    args = consume_args("--from-beginning", "--max-messages", "3")
    assert len(run_consume(FakeConsumer(LOGS, per_poll=5), args).splitlines()) == 3


def test_from_timestamp_starts_at_the_first_record_at_or_after_it() -> None:
    args = consume_args("--from-timestamp", "1001")
    assert sorted(run_consume(FakeConsumer(LOGS), args).splitlines()) == [b"b", b"d", b"null"]
    args = consume_args("--from-timestamp", "5000")  # after every record: nothing
    assert run_consume(FakeConsumer(LOGS), args) == b""


def test_keys_and_prefixes_in_kafka_order() -> None:
    args = consume_args("--from-beginning", "--print-key", "--key-separator", ":",
                        "--print-partition", "--print-timestamp")  # fmt: skip
    lines = run_consume(FakeConsumer(LOGS), args, partitions=(0,)).splitlines()
    assert lines == [
        b"CreateTime:1000:Partition:0:k1:a",
        b"CreateTime:1001:Partition:0:k2:b",
        b"CreateTime:1002:Partition:0:k1:null",
    ]


def test_records_past_the_end_offsets_at_start_are_not_printed() -> None:
    consumer = FakeConsumer({0: [record(0, 0, b"a")]}, per_poll=5)
    args = consume_args("--from-beginning")
    consume_cmd.start_positions(consumer, tps(0), args)
    ends = consumer.end_offsets(tps(0))
    consumer.logs[0].append(record(0, 1, b"late"))  # arrives after the command started
    consumer.end_offsets = lambda _tps: ends
    out = io.BytesIO()
    consume_cmd.consume(consumer, tps(0), args, out)
    assert out.getvalue() == b"a\n"


def test_follow_stops_after_the_idle_timeout() -> None:
    consumer = FakeConsumer(LOGS)
    args = consume_args("--from-beginning", "--follow", "--timeout-ms", "0")
    consume_cmd.start_positions(consumer, tps(0, 1), args)
    tally = consume_cmd.Tally()
    consume_cmd.consume(consumer, tps(0, 1), args, io.BytesIO(), tally)
    assert tally.count == 0  # a zero idle budget stops before the first poll


# ---- topics and cluster status --------------------------------------------------------------


def description() -> TopicDescription:
    return TopicDescription(
        name="orders",
        topic_id="abc",
        internal=False,
        partitions=(
            PartitionInfo(0, 1, 3, (1, 2, 3), (1, 2, 3)),
            PartitionInfo(1, -1, 0, (2, 3, 1), ()),
        ),
        configs={"retention.ms": "1000"},
    )


def test_topic_json_and_kafka_text() -> None:
    document = topic_json(description())
    assert document["partition_count"] == 2 and document["replication_factor"] == 3
    assert document["configs"] == {"retention.ms": "1000"}
    assert document["partitions"][1] == {
        "partition": 1, "leader": -1, "leader_epoch": 0, "replicas": [2, 3, 1], "isr": [],
        "adding_replicas": [], "removing_replicas": [], "under_replicated": True, "offline": True,
        "size_bytes": None, "remote_size_bytes": None, "log_start_offset": None,
        "local_log_start_offset": None,
    }  # fmt: skip
    lines = topic_text(document).splitlines()
    assert lines[0] == (
        "Topic: orders\tTopicId: abc\tPartitionCount: 2\tReplicationFactor: 3\t"
        "Configs: retention.ms=1000"
    )
    assert lines[1] == (
        "\tTopic: orders\tPartition: 0\tLeader: 1\tLeaderEpoch: 3\tReplicas: 1,2,3\tIsr: 1,2,3"
    )
    assert lines[2] == (
        "\tTopic: orders\tPartition: 1\tLeader: none\tLeaderEpoch: 0\tReplicas: 2,3,1\tIsr: -"
        "\tOffline UnderReplicated"
    )


def test_topic_sizes_are_the_leaders_replica() -> None:
    infos = {
        node: ReplicaInfo(size, remote_size_bytes=7, log_start_offset=2, local_log_start_offset=5)
        for node, size in ((1, 100), (2, 90))
    }
    logs = LogDirs(
        {
            n: {"/d": LogDirDescription(None, {TopicPartition("orders", 0): i})}
            for n, i in infos.items()
        }
    )
    document = topic_json(description(), log_dirs=logs)
    p0, p1 = document["partitions"]
    assert (p0["size_bytes"], p0["remote_size_bytes"], p0["log_start_offset"]) == (100, 7, 2)
    assert p0["local_log_start_offset"] == 5
    assert p1["size_bytes"] is None  # offline: no leader, no size
    lines = topic_text(document).splitlines()
    assert lines[1].endswith(
        "\tIsr: 1,2,3\tSize: 100\tRemoteSize: 7\tLogStart: 2\tLocalLogStart: 5"
    )
    assert "Size" not in lines[2]


def test_topic_json_with_every_config() -> None:
    entries = {"a": ConfigEntry("a", "1", True), "retention.ms": ConfigEntry("r", "1000", False)}
    assert topic_json(description(), entries)["configs"] == {"a": "1", "retention.ms": "1000"}


def test_cluster_json_and_status_text() -> None:
    response = admin_pb2.DescribeClusterResponse(
        cluster_id="c1",
        controller_id=2,
        controller_epoch=5,
        metadata_instances=[admin_pb2.MetadataInstance(instance_id=2, host="h", port=1,
                                                       is_controller=True)],
        nodes=[
            common_pb2.Node(node_id=1, kind=common_pb2.NODE_KIND_GATEWAY, host="h", port=3),
            common_pb2.Node(node_id=1, kind=common_pb2.NODE_KIND_STORAGE, host="h", port=2,
                            rack="r1"),
        ],
    )  # fmt: skip
    view = cluster_cmd.cluster_json(response)
    assert view["controller_id"] == 2 and view["controller_epoch"] == 5
    assert view["live_nodes"][0] == {
        "node_id": 1, "kind": "storage", "address": "h:2", "rack": "r1",
    }  # fmt: skip
    document = {
        "data_dir": "/d",
        "processes": [{"name": "storage-1", "role": "storage", "node_id": 1,
                       "address": "h:2", "pid": 42, "alive": True,
                       "metrics": "http://h:9404/metrics"}],
        "cluster": view,
        "error": None,
    }  # fmt: skip
    text = cluster_cmd.status_text(document)
    assert "Controller: metadata instance 2 (epoch 5)" in text
    assert "storage-1" in text and "42" in text
    assert "METRICS" in text and "http://h:9404/metrics" in text
    document["cluster"] = None
    document["error"] = "gateway h:3: NETWORK_EXCEPTION"
    assert "Cluster view unavailable: gateway h:3" in cluster_cmd.status_text(document)


def test_clean_deletes_only_what_the_launcher_made(tmp_path) -> None:
    from riverlog.cluster import LocalCluster

    LocalCluster(tmp_path, metadata_nodes=1, etcd_url="http://127.0.0.1:1").save_state()
    for name in ("logs", "run", "data"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text("x")
    (tmp_path / "keep.txt").write_text("mine")
    cluster_cmd._clean(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
