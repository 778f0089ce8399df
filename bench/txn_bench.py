"""What transactions cost (issue 14): against a local cluster (etcd, one metadata instance,
three storage nodes, two coordinators, one gateway), 100-byte records, 6 partitions, RF 1,
acks=all for everyone. Prints figures; not a test.

- produce: idempotent (no transactions) vs transactional with a commit every 1,000 records and
  with a commit every 100 ms, records/s from the first send to the last commit;
- consume: the same topic (its data and markers) read_uncommitted vs read_committed;
- end-to-end latency at 1,000 records/s with a commit every 100 ms, as a read_committed
  consumer sees each record (a record waits for its commit: about half the interval on
  average), and idempotent at the same rate for reference.

    .venv/bin/python bench/txn_bench.py [--records 200000] [--rounds 2] [--latency-seconds 10]
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import threading
import time

from riverlog.client import AdminClient, Consumer, NewTopic, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.types import TopicPartition

PARTITIONS = 6
VALUE = b"x" * 100
_NS = struct.Struct(">q")


def produce(address: str, topic: str, records: int, every: int | None, every_s: float | None,
            run: str) -> float:  # fmt: skip
    """records/s; `every` records or `every_s` seconds per transaction, or neither (idempotent)."""
    config: dict[str, object] = {"bootstrap.servers": address, "linger.ms": 5}
    transactional = every is not None or every_s is not None
    if transactional:
        config["transactional.id"] = f"bench-{run}"
    with Producer(config) as producer:
        if transactional:
            producer.init_transactions()
            producer.begin_transaction()
        send = producer.send
        start = time.perf_counter()
        opened = time.monotonic()
        for i in range(1, records + 1):
            send(topic, VALUE)
            if not transactional:
                continue
            if (every and i % every == 0) or (every_s and time.monotonic() - opened >= every_s):
                producer.commit_transaction()
                producer.begin_transaction()
                opened = time.monotonic()
        if transactional:
            producer.commit_transaction()
        else:
            producer.flush()
        return records / (time.perf_counter() - start)


def consume(address: str, topic: str, level: str) -> tuple[int, float]:
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    with Consumer({"bootstrap.servers": address, "isolation.level": level}) as consumer:
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        count = 0
        start = time.perf_counter()
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            for batch in consumer.poll(timeout_ms=1000).values():
                count += len(batch)
        return count, time.perf_counter() - start


def latency(address: str, topic: str, seconds: float, rate: int, commit_s: float | None,
            run: str) -> list[float]:  # fmt: skip
    """ms from send to a read_committed consumer's poll, `rate` records/s for `seconds`."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    total = int(seconds * rate)
    latencies: list[float] = []
    ready = threading.Event()

    def read() -> None:
        config = {"bootstrap.servers": address, "isolation.level": "read_committed",
                  "fetch.max.wait.ms": 100}  # fmt: skip
        with Consumer(config) as consumer:
            consumer.assign(tps)
            for tp in tps:
                consumer.position(tp)
            ready.set()
            deadline = time.monotonic() + seconds + 30
            while len(latencies) < total and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=200).values():
                    now = time.time_ns()
                    latencies.extend((now - _NS.unpack_from(r.value)[0]) / 1e6 for r in batch)

    reader = threading.Thread(target=read, name="latency-consumer")
    reader.start()
    ready.wait(60)
    config: dict[str, object] = {"bootstrap.servers": address}
    if commit_s is not None:
        config["transactional.id"] = f"bench-latency-{run}"
    padding = VALUE[_NS.size :]
    with Producer(config) as producer:
        if commit_s is not None:
            producer.init_transactions()
            producer.begin_transaction()
        start = opened = time.perf_counter()
        for i in range(total):
            pause = start + i / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            producer.send(topic, _NS.pack(time.time_ns()) + padding)
            if commit_s is not None and time.perf_counter() - opened >= commit_s:
                producer.commit_transaction()
                producer.begin_transaction()
                opened = time.perf_counter()
        if commit_s is not None:
            producer.commit_transaction()
        producer.flush()
    reader.join(seconds + 60)
    return sorted(latencies)


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="riverlog-txn-bench-") as data_dir:
        with LocalCluster(
            data_dir, storage_nodes=3, metadata_nodes=1, gateways=1, coordinators=2,
            extra_config={"metadata": {"transaction.state.log.num.partitions": "6",
                                       "offsets.topic.num.partitions": "6"}},
        ) as cluster:  # fmt: skip
            address = cluster.gateway_address
            topic = f"txn-bench-{int(time.time())}"
            with AdminClient({"bootstrap.servers": address}) as admin:
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
            print(f"cluster up: gateway {address}; topic {topic}: {PARTITIONS} partitions, RF 1, "
                  f"{len(VALUE)} B records, acks=all")  # fmt: skip
            modes = [
                ("idempotent, no transactions", None, None),
                ("transactional, commit every 1,000 records", 1000, None),
                ("transactional, commit every 100 ms", None, 0.1),
            ]
            for r in range(args.rounds):
                for label, every, every_s in modes:
                    rate = produce(address, topic, args.records, every, every_s, f"{r}-{every}")
                    print(f"round {r + 1} produce {args.records:,}: {label}: {rate:,.0f} rec/s")
            for r in range(args.rounds):
                for level in ("read_uncommitted", "read_committed"):
                    count, elapsed = consume(address, topic, level)
                    print(f"round {r + 1} consume {level}: {count / elapsed:,.0f} rec/s "
                          f"({count:,} records in {elapsed:.2f} s)")  # fmt: skip
            if args.latency_seconds > 0:
                for label, commit_s in (("idempotent", None), ("commit every 100 ms", 0.1)):
                    values = latency(address, topic, args.latency_seconds, args.rate, commit_s,
                                     label[:4])  # fmt: skip
                    p50, p99 = percentile(values, 0.5), percentile(values, 0.99)
                    print(f"end-to-end latency at {args.rate:,} rec/s, read_committed consumer, "
                          f"{label}: p50 {p50:.2f} ms, p99 {p99:.2f} ms "
                          f"({len(values):,} records)")  # fmt: skip


if __name__ == "__main__":
    main()
