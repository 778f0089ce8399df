"""What the fault tests read from the cluster, during the fault and after it, for the checker:
the history a concurrent consumer saw, what a consumer reads back at the end, and each
replica's copy of the log as its segment files hold it.

- `HighWatermarkWatcher`: a raw Fetch loop through the gateway, running during the fault, that
  records every record it sees (`Seen`) with the high watermark of the same fetch answer.
- `read_back` (SDK Consumer, assign + poll) and `read_replica_logs` (each storage node's
  segment files, decoded with `riverlog.common.records.reader`) gather the final state;
  `wait_for_convergence` polls the replicas' files until their logs stop moving.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

from riverlog.client import Consumer, TopicPartition
from riverlog.common.errors import ErrorCode
from riverlog.common.records.header import InvalidBatchError
from riverlog.common.records.reader import iter_batches_records, next_fetch_offset
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import data_pb2, gateway_pb2_grpc


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


@dataclass(frozen=True, slots=True)
class Seen:
    """One record a concurrent consumer fetched, with the high watermark of that answer."""

    partition: int
    offset: int
    value: bytes | None
    high_watermark: int


class HighWatermarkWatcher:
    """A consumer that runs DURING the fault: raw gateway Fetch calls for every partition of
    `topic`, from offset 0, recording each record with the high watermark of its answer.
    Retries every error (leaders move while it runs). Lifecycle: start() → stop()."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.address = bootstrap.split(",")[0]
        self.topic = topic
        self.positions = dict.fromkeys(range(partitions), 0)
        self.seen: list[Seen] = []
        self.errors: dict[str, int] = defaultdict(int)
        self.fetches = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="hw-watcher", daemon=True)

    def start(self) -> HighWatermarkWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _run(self) -> None:
        with sync_channel(self.address) as channel:
            stub = gateway_pb2_grpc.GatewayStub(channel)
            while not self._stop.is_set():
                request = data_pb2.FetchRequest(
                    max_wait_ms=100,
                    min_bytes=1,
                    max_bytes=4 << 20,
                    partitions=[
                        data_pb2.FetchPartition(
                            topic=self.topic,
                            partition=p,
                            fetch_offset=offset,
                            partition_max_bytes=512 << 10,
                        )
                        for p, offset in self.positions.items()
                    ],
                )
                try:
                    response = stub.Fetch(request, timeout=3)
                except grpc.RpcError as e:
                    self.errors[f"rpc {e.code().name}"] += 1
                    self._stop.wait(0.1)
                    continue
                self.fetches += 1
                self._handle(response)

    def _handle(self, response: data_pb2.FetchResponse) -> None:
        backoff = False
        for answer in response.partitions:
            p = answer.partition
            if answer.error_code != ErrorCode.NONE:
                self.errors[error_name(answer.error_code)] += 1
                backoff = True
                continue
            start = self.positions[p]
            data = bytes(answer.records)
            if not data:
                continue
            try:
                for record in iter_batches_records(data, start):
                    self.seen.append(Seen(p, record.offset, record.value, answer.high_watermark))
            except InvalidBatchError as e:
                self.errors[f"invalid batch: {e}"] += 1
                continue
            self.positions[p] = max(start, next_fetch_offset(data, start))
        if backoff:
            self._stop.wait(0.1)


def read_back(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60.0
) -> dict[int, list[tuple[int, bytes | None]]]:
    """Every record of `topic` up to its high watermark, per partition, through the SDK
    Consumer (assign + poll), as (offset, value) in the order polled."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    out: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning()
        end = consumer.end_offsets(tps)
        while time.monotonic() < deadline:
            for tp, records in consumer.poll(timeout_ms=500).items():
                out[tp.partition].extend((r.offset, r.value) for r in records)
            if all(consumer.position(tp) >= end[tp] for tp in tps):
                break
        else:
            raise AssertionError(f"read back timed out: end offsets {end}")
    return out


def read_replica_log(partition_dir: Path) -> tuple[dict[int, bytes | None], str | None]:
    """{offset: value} of one replica, read from its segment files (the node must be quiet).
    Returns the records and a note when a segment has a corrupt batch (reading stops there)."""
    records: dict[int, bytes | None] = {}
    note: str | None = None
    for segment in sorted(partition_dir.glob("*.log")):
        try:
            for record in iter_batches_records(segment.read_bytes()):
                records[record.offset] = record.value
        except InvalidBatchError as e:
            note = f"{segment.name}: {e}"
            break
    return records, note


def read_replica_logs(
    data_dir: Path, topic: str, partition: int, nodes: Iterable[int]
) -> dict[int, dict[int, bytes | None]]:
    """Each storage node's copy of one partition, {node: {offset: value}} (absent: {})."""
    out: dict[int, dict[int, bytes | None]] = {}
    for node in nodes:
        partition_dir = data_dir / "data" / f"storage-{node}" / f"{topic}-{partition}"
        out[node] = read_replica_log(partition_dir)[0] if partition_dir.is_dir() else {}
    return out


def wait_for_convergence(
    data_dir: Path,
    topic: str,
    partitions: int,
    replicas: Mapping[int, Iterable[int]],
    timeout: float,
) -> dict[int, dict[int, dict[int, bytes | None]]]:
    """Poll the replicas' files until every replica of each partition has the same log end
    offset twice in a row (bounded by `timeout`); returns the last reading."""
    deadline = time.monotonic() + timeout
    previous: dict[int, dict[int, int]] | None = None
    while True:
        logs = {p: read_replica_logs(data_dir, topic, p, replicas[p]) for p in range(partitions)}
        ends = {p: {n: max(r, default=-1) + 1 for n, r in logs[p].items()} for p in logs}
        same = all(len(set(e.values())) == 1 for e in ends.values())
        if (same and ends == previous) or time.monotonic() >= deadline:
            return logs
        previous = ends if same else None
        time.sleep(0.5)


@dataclass(frozen=True, slots=True)
class LeaderSample:
    """One partition's leader and leader epoch as the cluster described it at `at`."""

    at: float  # time.monotonic()
    partition: int
    leader: int
    epoch: int


class LeaderEpochWatcher:
    """Describes `topic` every `interval` s through the gateway while a fault runs, keeping
    each change of a partition's (leader, epoch), for `checker.check_leader_epochs`.
    Lifecycle: start() → stop(); describe errors are counted, not fatal."""

    def __init__(self, bootstrap: str, topic: str, interval: float = 0.5) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.interval = interval
        self.samples: list[LeaderSample] = []
        self.errors = 0
        self._last: dict[int, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="epoch-watcher", daemon=True)

    def start(self) -> LeaderEpochWatcher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=15)

    def _run(self) -> None:
        from riverlog.client import AdminClient

        config = {"bootstrap.servers": self.bootstrap, "request.timeout.ms": 3000}
        with AdminClient(config) as admin:
            while not self._stop.is_set():
                try:
                    description = admin.describe_topics([self.topic])[self.topic]
                except Exception:
                    self.errors += 1
                else:
                    now = time.monotonic()
                    for p in description.partitions:
                        state = (p.leader, p.leader_epoch)
                        if self._last.get(p.partition) != state:
                            self._last[p.partition] = state
                            self.samples.append(LeaderSample(now, p.partition, *state))
                self._stop.wait(self.interval)


def batch_bytes(data: bytes) -> list[bytes]:
    """The record batches of a segment file as raw bytes (stops at a torn tail)."""
    out = []
    position = 0
    while position + 12 <= len(data):
        length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
        end = position + 12 + length
        if length <= 0 or end > len(data):
            break
        out.append(data[position:end])
        position = end
    return out


def read_replica_bytes(
    data_dir: Path, topic: str, partition: int, nodes: Iterable[int]
) -> dict[int, bytes]:
    """Each storage node's copy of one partition as the bytes of its batches, in offset order
    (segment files concatenated, torn tails left out): what 'byte for byte' compares."""
    out: dict[int, bytes] = {}
    for node in nodes:
        partition_dir = data_dir / "data" / f"storage-{node}" / f"{topic}-{partition}"
        segments = sorted(partition_dir.glob("*.log")) if partition_dir.is_dir() else []
        out[node] = b"".join(b for s in segments for b in batch_bytes(s.read_bytes()))
    return out
