"""Helpers for the replication integration tests: a LocalCluster of three storage nodes with
short `broker.session.timeout.ms` and `replica.lag.time.max.ms`, replicated topics created
through the metadata API, produce/fetch against a partition's current leader, and the on-disk
log bytes of each replica for comparison.

Every wait is bounded; processes are started and stopped by LocalCluster (by PID).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import grpc

from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.errors import ErrorCode, raise_for
from riverlog.common.records import BatchBuilder
from riverlog.common.records.header import iter_batches
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import (
    admin_pb2,
    common_pb2,
    data_pb2,
    metadata_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
)

T = TypeVar("T")
TS = 1_700_000_000_000
SESSION_TIMEOUT_MS = 6_000  # short, yet long enough for a loaded 2-core machine
LAG_TIME_MAX_MS = 6_000


def wait_until(predicate: Callable[[], T | None], timeout_s: float = 60.0, what: str = "") -> T:
    """Poll `predicate` until it returns a truthy value (returned) or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except (grpc.RpcError, OSError, AssertionError) as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


def make_batch(count: int = 5, tag: int = 0, value_size: int = 100) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(
            TS + i, b"key-%d-%d" % (tag, i), (b"%d:%d|" % (tag, i)).ljust(value_size, b"v")
        )
    return builder.build()


def start_replication_cluster(
    root: Path,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
    lag_time_max_ms: int = LAG_TIME_MAX_MS,
    *,
    gateways: int = 0,
    racks: list[str] | None = None,
    gateway_config: Mapping[str, str] | None = None,
) -> LocalCluster:
    cluster = LocalCluster(
        root,
        storage_nodes=3,
        metadata_nodes=1,
        gateways=gateways,
        racks=racks,
        extra_config={
            "gateway": dict(gateway_config or {}),
            "storage": {
                "replica.lag.time.max.ms": str(lag_time_max_ms),
                "replica.fetch.wait.max.ms": "200",
                "replica.fetch.backoff.ms": "200",
            },
            "metadata": {
                "broker.session.timeout.ms": str(session_timeout_ms),
                "broker.heartbeat.interval.ms": "500",
            },
        },
    )
    try:
        cluster.start(timeout=120)
    except BaseException:
        cluster.stop()
        raise
    return cluster


class ReplicationHarness:
    """Speaks to the cluster's metadata and storage processes directly; over TLS with
    `credentials` (a client certificate of the cluster's CA), and then it creates topics through
    the cluster's gateway (a TLS cluster has two metadata instances: a write sent to the one
    that is not the controller would be forwarded)."""

    def __init__(
        self, cluster: LocalCluster, credentials: grpc.ChannelCredentials | None = None
    ) -> None:
        self.cluster = cluster
        self.credentials = credentials

    @contextmanager
    def metadata(self) -> Iterator[Any]:
        with sync_channel(self.cluster.metadata_addresses[0], self.credentials) as channel:
            yield metadata_pb2_grpc.MetadataServiceStub(channel)

    @contextmanager
    def storage(self, node_id: int) -> Iterator[Any]:
        address = self.cluster.storage(node_id).address
        assert address is not None
        with sync_channel(address, self.credentials) as channel:
            yield storage_pb2_grpc.StorageServiceStub(channel)

    def create_topic(self, prefix: str, configs: Mapping[str, str] | None = None) -> str:
        name = unique_topic_name(prefix)
        if self.credentials is not None:
            self.cluster.create_topic(name, 1, 3, configs)  # waits for the leader
            return name
        request = admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(
                    name=name, num_partitions=1, replication_factor=3, configs=dict(configs or {})
                )
            ]
        )
        with self.metadata() as stub:
            for result in stub.CreateTopics(request, timeout=30).topics:
                raise_for(result.error_code, result.error_message)
        wait_until(lambda: self.state(name).leader >= 0, what=f"a leader of {name}")
        return name

    def state(self, topic: str) -> common_pb2.PartitionState:
        with self.metadata() as stub:
            reply = stub.DescribeTopics(admin_pb2.DescribeTopicsRequest(names=[topic]), timeout=10)
        [described] = reply.topics
        assert described.error_code == ErrorCode.NONE, described.error_message
        return described.metadata.partitions[0]

    def wait_isr(
        self, topic: str, isr: set[int], timeout_s: float = 60.0
    ) -> common_pb2.PartitionState:
        def matches() -> common_pb2.PartitionState | None:
            state = self.state(topic)
            return state if set(state.isr) == isr else None

        return wait_until(
            matches,
            timeout_s,
            f"ISR {sorted(isr)} of {topic}",
        )

    def produce(
        self,
        node_id: int,
        topic: str,
        records: bytes,
        acks: int = common_pb2.ACKS_ALL,
        timeout_ms: int = 10_000,
    ) -> data_pb2.ProducePartitionResponse:
        request = data_pb2.ProduceRequest(
            acks=acks,  # type: ignore[arg-type]
            timeout_ms=timeout_ms,
            partitions=[data_pb2.ProducePartition(topic=topic, partition=0, records=records)],
        )
        with self.storage(node_id) as stub:
            reply = stub.Produce(request, timeout=timeout_ms / 1000 + 10)
        [result] = reply.partitions
        return result

    def produce_to_leader(
        self, topic: str, records: bytes, acks: int = common_pb2.ACKS_ALL
    ) -> data_pb2.ProducePartitionResponse:
        """Produce to whoever leads now, retrying while leadership is moving."""

        def attempt() -> data_pb2.ProducePartitionResponse | None:
            leader = self.state(topic).leader
            if leader < 0:
                return None
            result = self.produce(leader, topic, records, acks)
            if result.error_code in (
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                ErrorCode.FENCED_LEADER_EPOCH,
                ErrorCode.UNKNOWN_LEADER_EPOCH,
            ):
                return None
            return result

        return wait_until(attempt, 60, f"{topic} to take a produce")

    def fetch(self, node_id: int, topic: str, offset: int) -> data_pb2.FetchPartitionResponse:
        request = data_pb2.FetchRequest(
            partitions=[data_pb2.FetchPartition(topic=topic, partition=0, fetch_offset=offset)],
            max_bytes=1 << 20,
        )
        with self.storage(node_id) as stub:
            [result] = stub.Fetch(request, timeout=10).partitions
        return result

    def read_all(self, node_id: int, topic: str) -> list[tuple[int, bytes]]:
        """(offset, batch bytes) of every batch a consumer can read from the leader."""
        out: list[tuple[int, bytes]] = []
        offset = 0
        for _ in range(10_000):
            result = self.fetch(node_id, topic, offset)
            assert result.error_code == ErrorCode.NONE, result.error_message
            if not result.records:
                return out
            pos = 0
            for header in iter_batches(result.records):
                assert header.last_offset < result.high_watermark  # never above the HW
                if header.base_offset >= offset:
                    out.append((header.base_offset, result.records[pos : pos + header.size]))
                pos += header.size
                offset = header.next_offset
        raise AssertionError("the read did not end")

    def log_end_offsets(
        self, topic: str, nodes: set[int] | None = None
    ) -> dict[int, tuple[int, int]]:
        """node id -> (log end offset, high watermark) of the topic's replica there (on the
        live nodes, or on `nodes`)."""
        out: dict[int, tuple[int, int]] = {}
        for process in self.cluster.by_role("storage"):
            if not process.alive or (nodes is not None and process.node_id not in nodes):
                continue
            assert process.node_id is not None
            with self.storage(process.node_id) as stub:
                reply = stub.DescribeLogDirs(storage_pb2.DescribeLogDirsRequest(), timeout=10)
            for log_dir in reply.log_dirs:
                for p in log_dir.partitions:
                    if p.topic == topic:
                        out[process.node_id] = (p.log_end_offset, p.high_watermark)
        return out

    def describe_node(self, node_id: int) -> storage_pb2.DescribeLogDirsResponse:
        with self.storage(node_id) as stub:
            reply: storage_pb2.DescribeLogDirsResponse = stub.DescribeLogDirs(
                storage_pb2.DescribeLogDirsRequest(), timeout=10
            )
        return reply

    def log_bytes(self, node_id: int, topic: str) -> bytes:
        directory = self.cluster.data_dir / "data" / f"storage-{node_id}" / f"{topic}-0"
        return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))

    def wait_converged(self, topic: str, nodes: set[int], timeout_s: float = 60.0) -> int:
        """Wait until every node in `nodes` has the same log end offset and high watermark;
        returns the log end offset."""

        def converged() -> int | None:
            offsets = self.log_end_offsets(topic)
            values = {offsets.get(n) for n in nodes}
            if len(values) != 1 or None in values:
                return None
            [(leo, hw)] = values  # type: ignore[misc]
            return leo if leo == hw and leo > 0 else None

        return wait_until(converged, timeout_s, f"replicas {sorted(nodes)} of {topic} to converge")
