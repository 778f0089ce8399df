"""The fault tests' workload driver and checker, after Jepsen's and Kafka's replication tests: a
bounded workload runs while a test breaks real processes, and afterwards the checker holds the
cluster to what it promised.

- `Workload`: SDK producers (acks=all through the gateway) send records at a fixed rate to
  explicit partitions, round-robin, so every partition keeps receiving; each value carries a
  unique id (`run|producer|seq|`) and the delivery callbacks record every ACKNOWLEDGED record
  (partition, offset, id) with its send and acknowledgement times.
- `HighWatermarkWatcher`: a raw Fetch loop through the gateway, running during the fault, that
  records every record it sees with the high watermark of the same fetch answer.
- `read_back` (SDK Consumer, assign + poll) and `read_replica_logs` (each storage node's
  segment files, decoded with `riverlog.common.records.reader`) gather the final state.
- `check` compares them and returns a `Report`: acknowledged records lost, duplicated,
  misplaced or out of producer order; replicas that hold different records at one offset;
  records a consumer saw above the high watermark or that were later truncated; and how long
  the affected partitions had no acknowledged produce after the fault.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from riverlog.client import Consumer, Producer, TopicPartition
from riverlog.common.errors import ErrorCode
from riverlog.common.records.header import InvalidBatchError
from riverlog.common.records.reader import iter_batches_records, next_fetch_offset
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import data_pb2, gateway_pb2_grpc

VALUE_SIZE = 100
SEP = b"|"


@dataclass(frozen=True, slots=True)
class Ack:
    """One acknowledged record: where the cluster said it wrote it, and when."""

    record_id: bytes  # b"run|producer|seq"
    producer: int
    seq: int
    partition: int
    offset: int
    sent_at: float  # time.monotonic()
    acked_at: float


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def record_id(value: bytes | None) -> bytes | None:
    """The unique id at the start of a workload value (None for a foreign record)."""
    if not value or value.count(SEP) < 3:
        return None
    return SEP.join(value.split(SEP, 3)[:3])


class Workload:
    """`producers` SDK producers, each on its own thread, sending `rate` records/s in all to
    `partitions` partitions of `topic` (record n of a producer to partition n % partitions),
    until `stop()` or `max_records` per producer. Lifecycle: start() → mark_fault() → stop()."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        *,
        producers: int = 2,
        rate: float = 400.0,
        max_records: int = 4000,
        producer_config: Mapping[str, object] | None = None,
    ) -> None:
        self.topic = topic
        self.partitions = partitions
        self.run_id = uuid.uuid4().hex[:8].encode()
        self.config = {
            "bootstrap.servers": bootstrap,
            "acks": "all",
            "linger.ms": 5,
            "retry.backoff.ms": 50,
            "retry.backoff.max.ms": 500,
            "request.timeout.ms": 5000,
            "delivery.timeout.ms": 60_000,
            "max.block.ms": 10_000,
            **(producer_config or {}),
        }
        self._per_producer_rate = rate / producers
        self._max_records = max_records
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.acks: list[Ack] = []
        self.failures: dict[str, int] = defaultdict(int)
        self.sent = 0
        self.fault_at: float | None = None
        self.started_at = 0.0
        self._producers = [Producer(self.config) for _ in range(producers)]
        self._threads = [
            threading.Thread(target=self._run, args=(i,), name=f"workload-{i}", daemon=True)
            for i in range(producers)
        ]

    def start(self) -> Workload:
        self.started_at = time.monotonic()
        for thread in self._threads:
            thread.start()
        return self

    def mark_fault(self) -> float:
        """Note the moment of the fault (for the unavailability figure)."""
        self.fault_at = time.monotonic()
        return self.fault_at

    def _value(self, producer: int, seq: int) -> bytes:
        head = SEP.join((self.run_id, b"%d" % producer, b"%d" % seq)) + SEP
        return head + b"x" * max(0, VALUE_SIZE - len(head))

    def _run(self, index: int) -> None:
        producer = self._producers[index]
        interval = 1.0 / self._per_producer_rate
        due = time.monotonic()
        for seq in range(self._max_records):
            if self._stop.is_set():
                return
            sent_at = time.monotonic()
            try:
                producer.send(
                    self.topic,
                    self._value(index, seq),
                    partition=seq % self.partitions,
                    callback=self._callback(index, seq, sent_at),
                )
            except Exception as e:  # send() itself refused (metadata, buffer): count it
                self._fail(e)
            with self._lock:
                self.sent += 1
            due += interval
            delay = due - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)

    def _callback(self, producer: int, seq: int, sent_at: float):
        def done(metadata, error) -> None:
            if error is not None or metadata is None:
                self._fail(error)
                return
            ack = Ack(
                SEP.join((self.run_id, b"%d" % producer, b"%d" % seq)),
                producer,
                seq,
                metadata.partition,
                metadata.offset,
                sent_at,
                time.monotonic(),
            )
            with self._lock:
                self.acks.append(ack)

        return done

    def _fail(self, error: BaseException | None) -> None:
        with self._lock:
            self.failures[type(error).__name__ + ": " + str(error)[:80]] += 1

    def stop(self, flush_timeout: float = 60.0) -> None:
        """Stop sending, wait (bounded) for every outcome, close the producers."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)
        deadline = time.monotonic() + flush_timeout
        for producer in self._producers:
            try:
                producer.flush(timeout=max(1.0, deadline - time.monotonic()))
            except Exception as e:
                self._fail(e)
        for producer in self._producers:
            producer.close(timeout=5)

    def acked_since(self, since: float) -> int:
        with self._lock:
            return sum(1 for a in self.acks if a.acked_at >= since)

    def wait_for_acks(self, count: int, timeout: float, since: float | None = None) -> bool:
        """Wait until `count` acknowledgements arrived (since `since`); bounded."""
        deadline = time.monotonic() + timeout
        since = self.started_at if since is None else since
        while time.monotonic() < deadline:
            if self.acked_since(since) >= count:
                return True
            time.sleep(0.05)
        return False


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
    note = None
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
    out = {}
    for node in nodes:
        partition_dir = data_dir / "data" / f"storage-{node}" / f"{topic}-{partition}"
        out[node] = read_replica_log(partition_dir)[0] if partition_dir.is_dir() else {}
    return out


def wait_for_convergence(
    data_dir: Path, topic: str, partitions: int, replicas: Mapping[int, Iterable[int]], timeout
) -> dict[int, dict[int, dict[int, bytes | None]]]:
    """Poll the replicas' files until every replica of each partition has the same log end
    offset twice in a row (bounded by `timeout`); returns the last reading."""
    deadline = time.monotonic() + timeout
    previous = None
    while True:
        logs = {p: read_replica_logs(data_dir, topic, p, replicas[p]) for p in range(partitions)}
        ends = {p: {n: max(r, default=-1) + 1 for n, r in logs[p].items()} for p in logs}
        same = all(len(set(e.values())) == 1 for e in ends.values())
        if (same and ends == previous) or time.monotonic() >= deadline:
            return logs
        previous = ends if same else None
        time.sleep(0.5)


@dataclass
class Report:
    """What the checker found. `problems` empty means every guarantee held."""

    acked: int = 0
    read: int = 0
    seen_concurrently: int = 0
    replicas_compared: int = 0
    unacked_in_log: int = 0
    lost: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unavailable_s: dict[int, float | None] = field(default_factory=dict)

    @property
    def max_unavailable_s(self) -> float | None:
        values = [v for v in self.unavailable_s.values() if v is not None]
        if len(values) < len(self.unavailable_s):
            return None  # a partition never came back
        return max(values, default=0.0)

    def summary(self, name: str) -> str:
        worst = self.max_unavailable_s
        unavailable = "never recovered" if worst is None else f"{worst:.2f} s"
        return (
            f"[fault] {name}: checked {self.acked} acknowledged records "
            f"({self.read} read back, {self.seen_concurrently} seen during the fault, "
            f"{self.replicas_compared} replica records compared, "
            f"{self.unacked_in_log} unacknowledged in the log); "
            f"leadership unavailable {unavailable} on partitions "
            f"{sorted(self.unavailable_s)}; lost {len(self.lost)}; problems {len(self.problems)}"
        )


def _note(problems: list[str], limit: int, message: str) -> None:
    if len(problems) < limit:
        problems.append(message)
    elif len(problems) == limit:
        problems.append("... (more problems left out)")


def unavailability(
    acks: Iterable[Ack], fault_at: float, partitions: Iterable[int]
) -> dict[int, float | None]:
    """Per affected partition: seconds from the fault to the first acknowledgement of a record
    sent at or after it (None: there was none)."""
    first: dict[int, float] = {}
    for ack in acks:
        if ack.sent_at >= fault_at and ack.acked_at < first.get(ack.partition, float("inf")):
            first[ack.partition] = ack.acked_at
    return {p: (first[p] - fault_at if p in first else None) for p in partitions}


def check(
    workload: Workload,
    read: Mapping[int, list[tuple[int, bytes | None]]],
    replica_logs: Mapping[int, Mapping[int, Mapping[int, bytes | None]]],
    watcher: HighWatermarkWatcher | None = None,
    affected: Iterable[int] = (),
    allow_loss: bool = False,
    limit: int = 20,
) -> Report:
    """Hold the final state to the guarantees (see the module docstring). With `allow_loss`
    (unclean election) an acknowledged record may be missing, or found only where an earlier
    unacknowledged attempt of it was written on the replica that won the election; those are
    listed in `lost`, not in `problems`, but nothing may be duplicated, reordered or diverge."""
    report = Report(acked=len(workload.acks))
    problems = report.problems
    # Per partition: offsets strictly increasing; where every id is.
    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    by_offset: dict[tuple[int, int], bytes | None] = {}
    for p, records in read.items():
        last = -1
        for offset, value in records:
            report.read += 1
            if offset <= last:
                _note(problems, limit, f"p{p}: offset {offset} read after {last}")
            last = offset
            by_offset[(p, offset)] = value
            rid = record_id(value)
            if rid is not None:
                where[rid].append((p, offset))
    acked_ids = set()
    for ack in workload.acks:
        acked_ids.add(ack.record_id)
        found = where.get(ack.record_id, [])
        label = f"{ack.record_id.decode()} acked at p{ack.partition}@{ack.offset}"
        if not found:
            if allow_loss:
                report.lost.append(label)
            else:
                _note(problems, limit, f"LOST: {label}, not in the log")
        elif len(found) > 1:
            _note(problems, limit, f"DUPLICATE: {label}, read at {found}")
        elif found[0] != (ack.partition, ack.offset):
            if allow_loss:  # lost where it was acked; an earlier unacknowledged copy survived
                report.lost.append(f"{label}, an unacknowledged copy read at {found[0]}")
            else:
                _note(problems, limit, f"MISPLACED: {label}, read at {found[0]}")
    report.unacked_in_log = sum(1 for rid in where if rid not in acked_ids)
    # Order: one producer's acknowledged records of one partition in send order.
    # With allow_loss, records an unclean election dropped left the history: their offsets
    # were given to later records, so only the surviving ones are held to the order.
    per_stream: dict[tuple[int, int], list[Ack]] = defaultdict(list)
    for ack in workload.acks:
        if not allow_loss or where.get(ack.record_id) == [(ack.partition, ack.offset)]:
            per_stream[(ack.producer, ack.partition)].append(ack)
    for (producer, p), acks in per_stream.items():
        acks.sort(key=lambda a: a.seq)
        for a, b in itertools.pairwise(acks):
            if b.offset <= a.offset:
                _note(
                    problems,
                    limit,
                    f"REORDERED: producer {producer} p{p}: seq {a.seq}@{a.offset} "
                    f"then seq {b.seq}@{b.offset}",
                )
                break
    # Replicas: no offset holds two different records; each agrees with what was read.
    for p, logs in replica_logs.items():
        ends = {node: max(r, default=-1) + 1 for node, r in logs.items()}
        if len(set(ends.values())) > 1:
            _note(problems, limit, f"NOT CONVERGED: p{p} replica log end offsets {ends}")
        nodes = sorted(logs)
        for node in nodes:
            for offset, value in logs[node].items():
                report.replicas_compared += 1
                expected = by_offset.get((p, offset))
                if (p, offset) in by_offset and expected != value:
                    _note(
                        problems,
                        limit,
                        f"DIVERGED: p{p}@{offset} on node {node} holds {value[:24]!r}, "
                        f"consumers read {expected[:24] if expected else expected!r}",
                    )
        for a, b in itertools.combinations(nodes, 2):
            for offset in logs[a].keys() & logs[b].keys():
                if logs[a][offset] != logs[b][offset]:
                    _note(problems, limit, f"DIVERGED: p{p}@{offset} differs on nodes {a}, {b}")
    # The concurrent consumer: never above the high watermark, never later truncated.
    if watcher is not None:
        report.seen_concurrently = len(watcher.seen)
        for seen in watcher.seen:
            label = f"p{seen.partition}@{seen.offset}"
            if seen.offset >= seen.high_watermark:
                _note(problems, limit, f"ABOVE HW: {label} seen with HW {seen.high_watermark}")
            final = by_offset.get((seen.partition, seen.offset), b"<missing>")
            if final != seen.value and not allow_loss:
                _note(
                    problems,
                    limit,
                    f"TRUNCATED AFTER READ: {label} was {record_id(seen.value)!r}, "
                    f"now {record_id(final)!r}",
                )
    if workload.fault_at is not None:
        report.unavailable_s = unavailability(workload.acks, workload.fault_at, affected)
    return report
