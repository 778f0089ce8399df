"""Helpers for the reassignment integration tests: a LocalCluster of four storage nodes and two
metadata instances with short `broker.session.timeout.ms`, a gateway for the SDK, a producer
thread that records every acknowledged offset, read-back of a partition through the SDK
consumer, and the on-disk log bytes and directories of each replica.

Every wait is bounded; processes are started and stopped by LocalCluster (by PID).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from riverlog.client import AdminClient, Consumer, Producer, TopicPartition
from riverlog.client.admin import PartitionInfo
from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.errors import RiverlogError

T = TypeVar("T")
SESSION_TIMEOUT_MS = 20_000  # a paused node stays registered this long
LAG_TIME_MAX_MS = 3_000  # ... while it leaves the ISR after this long


def wait_until(predicate: Callable[[], T | None], timeout_s: float = 90.0, what: str = "") -> T:
    """Poll `predicate` until it returns a truthy value (returned) or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last: object = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except (RiverlogError, OSError) as exc:
            last = exc
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def reassign_cluster(
    root: Path, storage_config: dict[str, str] | None = None, storage_nodes: int = 4
) -> LocalCluster:
    """The cluster, not started."""
    return LocalCluster(
        root,
        storage_nodes=storage_nodes,
        metadata_nodes=2,
        gateways=1,
        extra_config={
            "storage": {
                "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
                "replica.fetch.wait.max.ms": "200",
                "replica.fetch.backoff.ms": "200",
                **(storage_config or {}),
            },
            "metadata": {
                "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "broker.heartbeat.interval.ms": "500",
            },
        },
    )


def start_reassign_cluster(
    root: Path, storage_config: dict[str, str] | None = None, storage_nodes: int = 4
) -> LocalCluster:
    cluster = reassign_cluster(root, storage_config, storage_nodes)
    try:
        cluster.start(timeout=180)
    except BaseException:
        cluster.stop()
        raise
    return cluster


class ReassignHarness:
    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.admin = AdminClient(bootstrap_servers=cluster.gateway_address)

    def __enter__(self) -> ReassignHarness:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.admin.close()

    def create_topic(self, prefix: str, replication_factor: int = 3) -> str:
        name = unique_topic_name(prefix)
        self.cluster.create_topic(name, 1, replication_factor, {"min.insync.replicas": "2"})
        return name

    def state(self, topic: str) -> PartitionInfo:
        [p] = self.admin.describe_topics([topic])[topic].partitions
        return p

    def moving(self, topic: str) -> bool:
        return TopicPartition(topic, 0) in self.admin.list_partition_reassignments(
            [TopicPartition(topic, 0)]
        )

    def reassign(self, topic: str, target: list[int] | None) -> None:
        self.admin.alter_partition_reassignments({TopicPartition(topic, 0): target})

    def wait_replicas(self, topic: str, replicas: tuple[int, ...], timeout_s: float = 90.0) -> None:
        """Until no move is in progress and the replicas are `replicas`, all in sync."""

        def done() -> bool:
            p = self.state(topic)
            return (
                not self.moving(topic)
                and p.replicas == replicas
                and set(p.isr) == set(replicas)
                and p.leader in replicas
            )

        wait_until(done, timeout_s, f"{topic} on {replicas}")

    def place(self, topic: str, replicas: tuple[int, ...]) -> PartitionInfo:
        """Move `topic` onto `replicas` (a reassignment, or nothing when already there) and
        make the first one lead; its state then."""
        self.reassign(topic, list(replicas))
        self.wait_replicas(topic, replicas)
        self.admin.elect_leaders("preferred", [TopicPartition(topic, 0)])
        return wait_until(
            lambda: (p := self.state(topic)).leader == replicas[0] and p,
            what=f"node {replicas[0]} leading {topic}",
        )

    def partition_dir(self, node_id: int, topic: str) -> Path:
        return self.cluster.data_dir / "data" / f"storage-{node_id}" / f"{topic}-0"

    def log_bytes(self, node_id: int, topic: str) -> bytes:
        directory = self.partition_dir(node_id, topic)
        return b"".join(p.read_bytes() for p in sorted(directory.glob("*.log")))

    def wait_logs_equal(self, topic: str, nodes: tuple[int, ...], timeout_s: float = 90.0) -> bytes:
        """Until the segment bytes of every replica on `nodes` are identical (and not empty)."""

        def equal() -> bytes | None:
            logs = {self.log_bytes(n, topic) for n in nodes}
            [only] = logs if len(logs) == 1 else [b""]
            return only or None

        return wait_until(equal, timeout_s, f"replica logs of {topic} on {nodes} to match")

    def read_all(
        self, topic: str, end: int, timeout_s: float = 90.0, partition: int = 0
    ) -> list[tuple[int, bytes]]:
        """(offset, value) of every record of `partition` below `end`, from the beginning."""
        tp = TopicPartition(topic, partition)
        out: list[tuple[int, bytes]] = []
        with Consumer(bootstrap_servers=self.cluster.gateway_address) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 0)
            deadline = time.monotonic() + timeout_s
            while (not out or out[-1][0] < end - 1) and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    out.extend((r.offset, r.value or b"") for r in records)
        return out


class AckedProducer:
    """Sends numbered records with acks=all from a thread until stopped; keeps the offset of
    every acknowledged record. Record n goes to partition n % `partitions` (`partition_of`)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int = 1) -> None:
        self.topic = topic
        self.partitions = partitions
        self.acked: dict[bytes, int] = {}
        self.failed = 0
        self.errors: list[str] = []  # the first failures, for the assertion message
        self._stop = threading.Event()
        self._producer = Producer(
            bootstrap_servers=bootstrap, acks="all", linger_ms=5, delivery_timeout_ms=60_000
        )
        self._thread = threading.Thread(target=self._run, name="acked-producer", daemon=True)

    def __enter__(self) -> AckedProducer:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            futures = []
            for _ in range(20):
                value = b"record-%08d" % sent
                partition = sent % self.partitions
                futures.append((value, self._producer.send(self.topic, value, partition=partition)))
                sent += 1
            for value, future in futures:
                try:
                    self.acked[value] = future.result(60).offset
                except Exception as exc:
                    self.failed += 1
                    self.errors.append(f"{value!r}: {type(exc).__name__}: {exc}")
            time.sleep(0.02)

    def partition_of(self, value: bytes) -> int:
        return int(value.removeprefix(b"record-")) % self.partitions

    def wait_acked(self, count: int, timeout_s: float = 60.0) -> None:
        wait_until(lambda: len(self.acked) >= count, timeout_s, f"{count} acknowledged records")

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(120)
            self._producer.close()
