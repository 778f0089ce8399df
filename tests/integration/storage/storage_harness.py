"""Helpers for the storage integration tests: a LocalCluster of real processes (etcd, one
metadata instance, storage nodes, no gateway), topics created through the metadata service's
own API, and blocking clients of a storage node's gRPC API and zero-copy channel.

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
from riverlog.common.zerocopy import ZeroCopyFetchClient
from riverlog.v1 import admin_pb2, common_pb2, data_pb2, metadata_pb2_grpc, storage_pb2_grpc

T = TypeVar("T")
TS = 1_700_000_000_000


def wait_until(predicate: Callable[[], T | None], timeout_s: float = 30.0, what: str = "") -> T:
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
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last})")


def make_batch(count: int = 5, tag: int = 0, value_size: int = 100, ts: int = TS) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(
            ts + i, b"key-%d-%d" % (tag, i), (b"%d:%d|" % (tag, i)).ljust(value_size, b"v")
        )
    return builder.build()


def start_cluster(root: Path, storage_nodes: int = 1, **storage_config: str) -> LocalCluster:
    cluster = LocalCluster(
        root,
        storage_nodes=storage_nodes,
        metadata_nodes=1,
        gateways=0,
        extra_config={"storage": dict(storage_config)} if storage_config else None,
    )
    try:
        cluster.start(timeout=90)
    except BaseException:
        cluster.stop()
        raise
    return cluster


class StorageHarness:
    """Clients of one LocalCluster: the metadata admin API and each storage node's APIs."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster

    # --- topics -----------------------------------------------------------------------------

    @contextmanager
    def metadata(self) -> Iterator[Any]:
        with sync_channel(self.cluster.metadata_addresses[0]) as channel:
            yield metadata_pb2_grpc.MetadataServiceStub(channel)

    def create_topic(
        self,
        prefix: str,
        partitions: int = 1,
        configs: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> common_pb2.TopicMetadata:
        name = name or unique_topic_name(prefix)
        request = admin_pb2.CreateTopicsRequest(
            topics=[
                admin_pb2.CreatableTopic(
                    name=name,
                    num_partitions=partitions,
                    replication_factor=1,
                    configs=dict(configs or {}),
                )
            ]
        )
        with self.metadata() as stub:
            for result in stub.CreateTopics(request, timeout=30).topics:
                raise_for(result.error_code, result.error_message)
        return self.wait_for_leaders(name, partitions)

    def describe_topic(self, name: str) -> common_pb2.TopicMetadata | None:
        with self.metadata() as stub:
            reply = stub.DescribeTopics(admin_pb2.DescribeTopicsRequest(names=[name]), timeout=10)
        for topic in reply.topics:
            if topic.error_code == ErrorCode.NONE and topic.metadata.name == name:
                return topic.metadata
        return None

    def wait_for_leaders(self, name: str, partitions: int) -> common_pb2.TopicMetadata:
        def ready() -> common_pb2.TopicMetadata | None:
            topic = self.describe_topic(name)
            if topic is None or len(topic.partitions) < partitions:
                return None
            return topic if all(p.leader >= 0 for p in topic.partitions) else None

        return wait_until(ready, 30, f"leaders of {name}")

    def delete_topic(self, name: str) -> None:
        with self.metadata() as stub:
            reply = stub.DeleteTopics(admin_pb2.DeleteTopicsRequest(names=[name]), timeout=30)
        for result in reply.topics:
            raise_for(result.error_code, result.error_message)

    # --- storage nodes ------------------------------------------------------------------------

    def address(self, node_id: int) -> str:
        address = self.cluster.storage(node_id).address
        assert address is not None
        return address

    def zero_copy_port(self, node_id: int) -> int:
        return int(self.cluster.storage(node_id).info["zero_copy_port"])

    @contextmanager
    def storage(self, node_id: int = 1) -> Iterator[Any]:
        with sync_channel(self.address(node_id)) as channel:
            yield storage_pb2_grpc.StorageServiceStub(channel)

    @contextmanager
    def zero_copy(self, node_id: int = 1) -> Iterator[ZeroCopyFetchClient]:
        with ZeroCopyFetchClient("127.0.0.1", self.zero_copy_port(node_id)) as client:
            yield client

    def log_dir(self, node_id: int = 1) -> Path:
        return self.cluster.data_dir / "data" / f"storage-{node_id}"

    def produce_when_ready(
        self, stub: Any, topic: str, partition: int, records: bytes, timeout_s: float = 30.0
    ) -> data_pb2.ProducePartitionResponse:
        """Produce once the node hosts the partition (its image may lag the controller's)."""

        def attempt() -> data_pb2.ProducePartitionResponse | None:
            reply = stub.Produce(produce_request(topic, partition, records), timeout=10)
            result = reply.partitions[0]
            if result.error_code in (
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ):
                return None
            return result

        return wait_until(attempt, timeout_s, f"{topic}-{partition} to take appends")


def produce_request(
    topic: str, partition: int, records: bytes, acks: int = common_pb2.ACKS_LEADER, **kw: Any
) -> data_pb2.ProduceRequest:
    return data_pb2.ProduceRequest(
        acks=acks,  # type: ignore[arg-type]
        timeout_ms=10_000,
        partitions=[data_pb2.ProducePartition(topic=topic, partition=partition, records=records)],
        **kw,
    )


def fetch_request(*parts: tuple[str, int, int], **kw: Any) -> data_pb2.FetchRequest:
    return data_pb2.FetchRequest(
        partitions=[
            data_pb2.FetchPartition(topic=t, partition=p, fetch_offset=o) for t, p, o in parts
        ],
        **kw,
    )


def fetch_all(
    fetch: Callable[[data_pb2.FetchRequest], data_pb2.FetchResponse],
    topic: str,
    partition: int,
    max_bytes: int = 1 << 20,
) -> bytes:
    """Every byte of a partition up to its high watermark, fetch after fetch."""
    out = bytearray()
    offset = 0
    for _ in range(100_000):
        response = fetch(fetch_request((topic, partition, offset), max_bytes=max_bytes))
        [p] = response.partitions
        assert p.error_code == ErrorCode.NONE, p.error_message
        if not p.records:
            assert offset == p.high_watermark
            return bytes(out)
        out += p.records
        offset = _next_offset(p.records)
    raise AssertionError("fetch did not reach the high watermark")


def _next_offset(records: bytes) -> int:
    return iter_batches(records)[-1].next_offset
