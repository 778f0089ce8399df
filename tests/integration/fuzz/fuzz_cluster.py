"""The cluster-side oracles of the fuzzer: every process still alive, no traceback or
"unexpected error" in any service log (read incrementally from the files the LocalCluster
writes), a health probe that must answer within a generous bound (GetMetadata, then a produce
and fetch round trip on a control topic no fuzzed request names), and at the end a normal
round trip through the SDK. Also the state the fuzzer restores between rounds so that one
request cannot starve the probes: client quotas removed, storage nodes unmarked as draining
(a draining node takes no new replica, so the pool's RF 2 topics could not be recreated), the
pool's topics recreated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import grpc

from riverlog.client import Consumer, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder, iter_batches_records
from riverlog.common.rpc.channel import CLIENT_ID_KEY, sync_channel
from riverlog.common.types import TopicPartition
from riverlog.v1 import admin_pb2, common_pb2, data_pb2, gateway_pb2, gateway_pb2_grpc

PROBE_CLIENT = ((CLIENT_ID_KEY, "riverlog-fuzz-probe"),)
PROBE_TIMEOUT_S = 30.0
BAD_LOG_LINE = re.compile(r"Traceback|unexpected error", re.IGNORECASE)
# (name, partitions, replication factor) of the topics the pool starts with (recreated when
# a fuzzed DeleteTopics removes them), its group and its user.
POOL_TOPICS = [("fuzz-a", 3, 2), ("fuzz-b", 1, 1), ("fuzz-compact", 2, 2)]
POOL_GROUP = "fuzz-group"
POOL_USER = "fuzz-user"


class LogWatcher:
    """New lines of every service log since the last look that show a crash or a bug."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self._offsets: dict[Path, int] = {}
        self.findings()  # start at the current ends: start-up is not the fuzzer's business

    def findings(self) -> list[str]:
        out: list[str] = []
        for proc in self.cluster.processes.values():
            if proc.role == "etcd":
                continue
            path = proc.log_path
            try:
                with path.open("rb") as f:
                    f.seek(self._offsets.get(path, 0))
                    data = f.read()
                    self._offsets[path] = f.tell()
            except OSError:
                continue
            lines = data.decode("utf-8", "replace").splitlines()
            for i, line in enumerate(lines):
                if BAD_LOG_LINE.search(line):
                    context = "\n    ".join(lines[max(0, i - 1) : i + 12])
                    out.append(f"{proc.name} log: {context}")
        return out


def dead_processes(cluster: LocalCluster) -> list[str]:
    return [
        f"{p.name} (pid {p.pid}) died, status {p.returncode}; log tail:\n{p.log_tail(30)}"
        for p in cluster.processes.values()
        if not p.alive
    ]


class Probe:
    """The control topic's round trip through the gateway, each call with a deadline."""

    def __init__(self, gateway_address: str, topic: str) -> None:
        self.topic = topic
        self.channel = sync_channel(gateway_address)
        self.stub = gateway_pb2_grpc.GatewayStub(self.channel)
        self.rounds = 0

    def close(self) -> None:
        self.channel.close()

    def leader(self) -> int:
        meta = self.stub.GetMetadata(
            gateway_pb2.GetMetadataRequest(topics=[self.topic]),
            timeout=PROBE_TIMEOUT_S,
            metadata=PROBE_CLIENT,
        )
        return int(meta.topics[0].partitions[0].leader)

    def log_end(self) -> int:
        answer = self.stub.ListOffsets(
            data_pb2.ListOffsetsRequest(
                partitions=[
                    data_pb2.ListOffsetsPartition(
                        topic=self.topic, partition=0, spec=common_pb2.OFFSET_SPEC_LATEST
                    )
                ]
            ),
            timeout=PROBE_TIMEOUT_S,
            metadata=PROBE_CLIENT,
        )
        return int(answer.partitions[0].offset)

    def check(self) -> None:
        """Raises AssertionError (or grpc.RpcError: DEADLINE_EXCEEDED is a hang) unless the
        gateway answers metadata and a record produced with acks=all comes back."""
        self.rounds += 1
        t = PROBE_TIMEOUT_S
        meta = self.stub.GetMetadata(
            gateway_pb2.GetMetadataRequest(topics=[self.topic]), timeout=t, metadata=PROBE_CLIENT
        )
        assert [x.name for x in meta.topics] == [self.topic], meta
        value = f"probe-{self.rounds}".encode()
        builder = BatchBuilder()
        builder.append(0, b"probe", value)
        produced = self.stub.Produce(
            data_pb2.ProduceRequest(
                acks=common_pb2.ACKS_ALL,
                timeout_ms=20_000,
                partitions=[
                    data_pb2.ProducePartition(
                        topic=self.topic, partition=0, records=builder.build()
                    )
                ],
            ),
            timeout=t,
            metadata=PROBE_CLIENT,
        )
        [part] = produced.partitions
        assert part.error_code == ErrorCode.NONE, part
        fetched = self.stub.Fetch(
            data_pb2.FetchRequest(
                max_wait_ms=0,
                max_bytes=1 << 20,
                partitions=[
                    data_pb2.FetchPartition(
                        topic=self.topic,
                        partition=0,
                        fetch_offset=part.base_offset,
                        partition_max_bytes=1 << 20,
                    )
                ],
            ),
            timeout=t,
            metadata=PROBE_CLIENT,
        )
        [got] = fetched.partitions
        assert got.error_code == ErrorCode.NONE, got
        values = [r.value for r in iter_batches_records(got.records, part.base_offset)]
        assert values[:1] == [value], (values, value)


def remove_client_quotas(stub: gateway_pb2_grpc.GatewayStub) -> int:
    """Remove every client quota the fuzzer may have set; the number of entities cleared."""
    described = stub.DescribeClientQuotas(
        admin_pb2.DescribeClientQuotasRequest(), timeout=PROBE_TIMEOUT_S, metadata=PROBE_CLIENT
    )
    entries = [
        admin_pb2.AlterClientQuotasRequest.Entry(
            entity=e.entity,
            ops=[admin_pb2.AlterClientQuotasRequest.Op(key=k, remove=True) for k in e.values],
        )
        for e in described.entries
    ]
    if entries:
        answer = stub.AlterClientQuotas(
            admin_pb2.AlterClientQuotasRequest(entries=entries),
            timeout=PROBE_TIMEOUT_S,
            metadata=PROBE_CLIENT,
        )
        failed = [r for r in answer.results if r.error_code != ErrorCode.NONE]
        assert not failed, failed
    return len(entries)


def undrain_nodes(stub: gateway_pb2_grpc.GatewayStub) -> list[int]:
    """Unmark every storage node a fuzzed AlterNodeDraining marked; the nodes unmarked."""
    described = stub.DescribeCluster(
        admin_pb2.DescribeClusterRequest(), timeout=PROBE_TIMEOUT_S, metadata=PROBE_CLIENT
    )
    marked = list(described.draining_nodes)
    for node_id in marked:
        answer = stub.AlterNodeDraining(
            admin_pb2.AlterNodeDrainingRequest(node_id=node_id, draining=False),
            timeout=PROBE_TIMEOUT_S,
            metadata=PROBE_CLIENT,
        )
        assert answer.error_code == ErrorCode.NONE, answer
    return marked


def ensure_topics(
    stub: gateway_pb2_grpc.GatewayStub, topics: Iterable[tuple[str, int, int]]
) -> None:
    """(Re)create the pool's topics a fuzzed DeleteTopics removed: (name, partitions, rf)."""
    request = admin_pb2.CreateTopicsRequest(
        topics=[
            admin_pb2.CreatableTopic(name=n, num_partitions=p, replication_factor=r)
            for n, p, r in topics
        ]
    )
    try:
        answer = stub.CreateTopics(request, timeout=PROBE_TIMEOUT_S, metadata=PROBE_CLIENT)
    except grpc.RpcError as exc:
        details = f"{exc.code()} {exc.details()}"
        raise AssertionError(f"cannot recreate the fuzz topics: {details}") from None
    for result in answer.topics:
        ok = (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)
        assert result.error_code in ok, result


def sdk_round_trip(cluster: LocalCluster, topic: str, count: int = 200) -> None:
    """A normal produce (acks=all, idempotent) and consume of `count` records through the SDK
    on a fresh replicated topic: the cluster still serves."""
    cluster.create_topic(topic, partitions=3, replication_factor=2)
    conf = {"bootstrap.servers": cluster.gateway_address}
    with Producer({**conf, "acks": "all", "linger.ms": 5}) as producer:
        futures = [producer.send(topic, value=b"v%d" % i, key=b"k%d" % i) for i in range(count)]
        producer.flush(30)
        for future in futures:
            future.result(30)
    consumer = Consumer({**conf, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        seen: set[bytes] = set()
        for _ in range(100):
            for records in consumer.poll(timeout_ms=500).values():
                seen.update(r.value for r in records)
            if len(seen) >= count:
                break
        assert seen == {b"v%d" % i for i in range(count)}, f"consumed {len(seen)} of {count}"
    finally:
        consumer.close()
