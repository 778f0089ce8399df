"""End-to-end SDK throughput and latency against a real local cluster. Prints figures; not a test.

Starts a cluster with the launcher (etcd, one metadata instance, three storage nodes, one
gateway, all on this machine), creates a topic of 6 partitions (`--partitions`) with replication
factor 1, then:

1. produces N records (default 1,000,000) of 100-byte values (`--value-size`) with acks=1
   through `Producer` and prints records/s and MB/s (value bytes), from the first send to the
   end of `flush()`;
2. consumes them all with `Consumer` from the beginning (reading every record's value, as an
   application would) and prints records/s and MB/s;
3. sends 1,000 records/s for ~10 s while a consumer thread reads them, and prints the p50,
   p99 and max end-to-end latency (the producer's send time, in the value, to the moment
   `poll()` hands the record to the consumer) and of the acknowledgement (send to the
   producer's callback: the producer → gateway → leader half and back, where internal TLS
   adds its hop), as `latency_probe.summary` prints them.

For each phase it also prints the CPU seconds each process used (this client process, the
gateway, every storage node, metadata, etcd) per wall second, which says what limits the
figures on a small machine: a sum near the number of cores means the machine is CPU-bound.

    .venv/bin/python bench/produce_consume_bench.py [--records N] [--linger-ms 5]
        [--batch-size 16384] [--compression none] [--latency-seconds 10] [--bootstrap host:port]
        [--partitions 6] [--value-size 100] [--tls] [--no-metrics] [--fetch-push-credit N]
        [--pid NAME=PID ...]

`--tls` starts the cluster as `riverlog cluster up --tls` does (mutual TLS between services,
TLS from the client to the gateway; storage nodes then serve fetches over TLS gRPC, without the
zero-copy channel). `--bootstrap` uses a running cluster instead of starting one (CPU figures
then cover this process only). Clients use Kafka's defaults unless an option says otherwise.
"""

from __future__ import annotations

import argparse
import os
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench_common import announce
from latency_probe import summary

from riverlog.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from riverlog.cluster import LocalCluster

VALUE_SIZE = 100
PARTITIONS = 6
CLIENT_TLS: dict[str, object] = {}  # SDK settings for a --tls cluster (its CA)
CONSUMER: dict[str, object] = {}  # more consumer settings (--fetch-push-credit)
PRODUCER: dict[str, object] = {}  # more producer settings (--producer-direct-access)
_NS = struct.Struct(">q")
_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (0 if it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICKS


@contextmanager
def measured(name: str, pids: dict[str, int], records: int = 0) -> Iterator[None]:
    """Print the CPU share of every process over the block; with `records`, also the CPU
    microseconds per record of the client, the gateways and the storage nodes, which hold
    better than rates on a machine shared with other work."""
    before = {label: cpu_seconds(pid) for label, pid in pids.items()}
    start = time.perf_counter()
    yield
    wall = time.perf_counter() - start
    used = {label: cpu_seconds(pid) - before[label] for label, pid in pids.items()}
    parts = ", ".join(f"{label} {cpu / wall:.2f}" for label, cpu in used.items() if cpu > 0.005)
    print(f"  CPU/wall during {name}: {parts}; total {sum(used.values()) / wall:.2f} cores")
    if records > 0:
        kinds = {"client": 0.0, "gateway": 0.0, "storage": 0.0}
        for label, cpu in used.items():
            kind = label.split("-")[0]
            if kind in kinds:
                kinds[kind] += cpu
        shown = ", ".join(f"{kind} {cpu / records * 1e6:.2f}" for kind, cpu in kinds.items())
        every = sum(used.values()) / records * 1e6
        print(f"  CPU us/record during {name}: {shown}; all {every:.2f}")


def produce(
    address: str, topic: str, records: int, args: argparse.Namespace, size: int, many: bool = False
) -> float:
    value = b"x" * size
    config = {
        **CLIENT_TLS,
        "bootstrap.servers": address,
        "acks": "1",
        "linger.ms": args.linger_ms,
        "batch.size": args.batch_size,
        "compression.type": args.compression,
        **PRODUCER,
    }
    with Producer(config) as producer:
        producer.send(topic, value).result(30)  # metadata and connection warmed up
        send = producer.send
        start = time.perf_counter()
        if many:
            chunk = [value] * 10_000
            for done in range(0, records, len(chunk)):
                producer.send_many(topic, chunk[: records - done])
        else:
            for _ in range(records):
                send(topic, value)
        producer.flush()
        elapsed = time.perf_counter() - start
    return elapsed


def consume(address: str, topic: str, records: int) -> tuple[int, float]:
    config = {
        **CLIENT_TLS,
        **CONSUMER,
        "bootstrap.servers": address,
        "auto.offset.reset": "earliest",
    }
    with Consumer(config) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        count = 0
        size = 0
        start = time.perf_counter()
        while count < records:
            for batch in consumer.poll(timeout_ms=1000).values():
                for record in batch:  # touch every record, as an application does
                    size += len(record.value)
                count += len(batch)
        return count, time.perf_counter() - start


def latency(
    address: str, topic: str, seconds: float, rate: int, linger_ms: int | None
) -> tuple[list[float], list[int]]:
    """Send `rate` records/s for `seconds`: end-to-end latencies in ms as a consumer thread saw
    them (sorted), and send → acknowledgement latencies in ns."""
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    total = int(seconds * rate)
    latencies: list[float] = []
    ready = threading.Event()

    def read() -> None:
        config = {**CLIENT_TLS, **CONSUMER}
        with Consumer(config, bootstrap_servers=address, fetch_max_wait_ms=100) as consumer:
            consumer.assign(tps)
            for tp in tps:
                consumer.position(tp)  # at the end, before the first send
            ready.set()
            deadline = time.monotonic() + seconds + 30
            while len(latencies) < total and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=200).values():
                    now = time.time_ns()
                    latencies.extend((now - _NS.unpack_from(r.value)[0]) / 1e6 for r in batch)

    reader = threading.Thread(target=read, name="latency-consumer")
    reader.start()
    ready.wait(60)
    padding = b"x" * (VALUE_SIZE - _NS.size)
    settings: dict[str, object] = {
        **CLIENT_TLS,
        "bootstrap.servers": address,
        "acks": "1",
        **PRODUCER,
    }
    if linger_ms is not None:
        settings["linger.ms"] = linger_ms
    acks: list[int] = []
    with Producer(settings) as producer:
        start = time.perf_counter()
        for i in range(total):
            pause = start + i / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            sent = time.time_ns()
            producer.send(
                topic,
                _NS.pack(sent) + padding,
                callback=lambda _m, _e, sent=sent: acks.append(time.time_ns() - sent),
            )
        producer.flush()
    reader.join(seconds + 60)
    return sorted(latencies), acks


def percentile(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def run(address: str, pids: dict[str, int], args: argparse.Namespace) -> None:
    topic = f"bench-{int(time.time())}"
    with AdminClient(CLIENT_TLS, bootstrap_servers=address) as admin:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    Producer(CLIENT_TLS, bootstrap_servers=address, max_block_ms=60_000).close()
    print(f"topic {topic}: {PARTITIONS} partitions, RF 1; acks=1, linger.ms={args.linger_ms}, "
          f"batch.size={args.batch_size}, compression={args.compression}")  # fmt: skip

    runs = [(VALUE_SIZE, args.records, False), (1024, args.records // 5, False)]
    runs.append((VALUE_SIZE, args.records, True))
    for size, count, many in runs:
        with measured("produce", pids, count):
            elapsed = produce(address, topic, count, args, size, many)
        how = "send_many" if many else "send"
        print(f"produce {count:,} x {size} B ({how}): {count / elapsed:,.0f} records/s, "
              f"{count * size / 1e6 / elapsed:,.1f} MB/s ({elapsed:.2f} s)")  # fmt: skip

    total = args.records + 1
    with measured("consume", pids, total):
        count, elapsed = consume(address, topic, total)
    print(f"consume: {count / elapsed:,.0f} records/s ({count:,} records in {elapsed:.2f} s)")

    if args.latency_seconds > 0:
        for linger in (None, 0):
            with measured("latency run", pids):
                values, acks = latency(address, topic, args.latency_seconds, args.rate, linger)
            shown = "default" if linger is None else linger
            print(f"end-to-end latency at {args.rate:,} records/s for {args.latency_seconds:g} s "
                  f"({len(values):,} records, linger.ms={shown}): "
                  f"p50 {percentile(values, 0.5):.2f} ms, p99 {percentile(values, 0.99):.2f} ms, "
                  f"max {values[-1] if values else float('nan'):.2f} ms; "
                  f"{summary('ack', acks)}")  # fmt: skip


def main(
    argv: list[str] | None = None, on_cluster: Callable[[LocalCluster], None] | None = None
) -> None:
    global PARTITIONS, VALUE_SIZE
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--linger-ms", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16_384)
    parser.add_argument("--compression", default="none")
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=1000, help="records/s of the latency run")
    parser.add_argument("--bootstrap", help="use this running cluster's gateway instead")
    parser.add_argument("--partitions", type=int, default=PARTITIONS)
    parser.add_argument("--value-size", type=int, default=VALUE_SIZE, help="bytes (at least 8)")
    parser.add_argument(
        "--tls",
        action="store_true",
        help="a cluster with every channel encrypted (cluster up --tls)",
    )
    parser.add_argument(
        "--no-metrics", action="store_true", help="processes serve no Prometheus /metrics"
    )
    parser.add_argument("--fetch-push-credit", type=int, default=0, help="consumers' setting")
    parser.add_argument(
        "--producer-direct-access",
        choices=["true", "false"],
        help="the producers' direct.access (default: the SDK's, true; decision 0047)",
    )
    parser.add_argument(
        "--pid", action="append", default=[], help="NAME=PID: with --bootstrap, its CPU too"
    )
    args = parser.parse_args(argv)
    if args.fetch_push_credit:
        CONSUMER["fetch.push.credit"] = args.fetch_push_credit
    if args.producer_direct_access:
        PRODUCER["direct.access"] = args.producer_direct_access
    PARTITIONS, VALUE_SIZE = args.partitions, max(args.value_size, _NS.size)
    if args.bootstrap:
        named = dict(item.split("=", 1) for item in args.pid)
        run(args.bootstrap, {"client": os.getpid(), **{k: int(v) for k, v in named.items()}}, args)
        return
    with tempfile.TemporaryDirectory(prefix="riverlog-bench-") as data_dir:
        local = LocalCluster(
            data_dir,
            storage_nodes=3,
            metadata_nodes=1,
            gateways=1,
            tls=args.tls,
            metrics=not args.no_metrics,
        )
        with local as cluster:
            CLIENT_TLS.update(cluster.client_tls_config)
            if on_cluster is not None:
                on_cluster(cluster)
            run(cluster.gateway_address, announce(cluster), args)


if __name__ == "__main__":
    main()
