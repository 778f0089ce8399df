"""The fault tests' workload, after Jepsen's and Kafka's replication tests: a bounded stream of
acks=all produces that runs while a test breaks real processes, recording every record the
cluster acknowledged so `checker.check` can hold the cluster to it afterwards.

`Workload` runs SDK producers (acks=all through the gateway) that send records at a fixed rate
to explicit partitions, round-robin, so every partition keeps receiving; each value carries a
unique id (`run|producer|seq|`, see `record_id`) and the delivery callbacks record every
ACKNOWLEDGED record (partition, offset, id) with its send and acknowledgement times as an `Ack`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from riverlog.client import Producer, RecordMetadata

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

    def _callback(
        self, producer: int, seq: int, sent_at: float
    ) -> Callable[[RecordMetadata | None, BaseException | None], None]:
        def done(metadata: RecordMetadata | None, error: BaseException | None) -> None:
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
