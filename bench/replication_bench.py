"""What replication costs and how fast leadership moves, against a real local cluster. Prints
figures; not a test.

Starts a cluster with the launcher (etcd, two metadata instances, three storage nodes, one
gateway, all on this machine, with a short broker session timeout so a dead node is noticed in
seconds) and, for replication factor 1 with acks=1 and replication factor 3 with acks=all
(min.insync.replicas=2), each on a topic of 6 partitions:

1. produces N records (default 200,000) of 100 bytes as fast as the SDK sends them and prints
   records/s, from the first send to the end of `flush()`;
2. sends a fixed rate (default 1,000 records/s for 10 s) and prints the p50, p99 and max of the
   acknowledgement latency (send() to the delivery callback) and of the end-to-end latency (send
   to a concurrent consumer's poll(); a consumer sees a record once the high watermark passed
   it, so with acks=all the two are close).

Then, on the replication-factor-3 topic, `--failovers` times (default 5): a producer sends 500
records/s to partition 0; the leader of partition 0 is killed with SIGKILL; the figure is the
time from the kill to the first acknowledgement of a record sent after it. The killed node is
restarted and the ISR allowed to fill up again before the next round. Prints each round, p50
and max. It is bounded below by the broker session timeout (the controller moves leadership
when the dead node's lease lapses), so that is printed too.

    .venv/bin/python bench/replication_bench.py [--records 200000] [--rate 1000]
        [--latency-seconds 10] [--failovers 5] [--session-timeout-ms 3000] [--value-size 100]
        [--partitions 6]

`--value-size 1024 --partitions 1 --latency-seconds 0 --failovers 0` is the 1 KiB RF 3 row of
the side-by-side table (issue 10) alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable

from produce_consume_bench import PARTITIONS, VALUE_SIZE, measured, percentile

from riverlog.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from riverlog.cluster import LocalCluster

WAIT_S = 60.0


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.2) -> bool:
    """Poll `predicate` (exceptions count as False) until true or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except Exception:
            pass
        time.sleep(interval)
    return False


def throughput(address: str, topic: str, acks: str, records: int) -> float:
    """Records/s of one producer sending `records` as fast as it can, flush included."""
    value = b"x" * VALUE_SIZE
    with Producer(bootstrap_servers=address, acks=acks) as producer:
        producer.send(topic, value).result(30)  # metadata, producer id and channel warmed up
        send = producer.send
        start = time.perf_counter()
        for _ in range(records):
            send(topic, value)
        producer.flush()
        return records / (time.perf_counter() - start)


def fixed_rate(
    address: str, topic: str, acks: str, rate: int, seconds: float, partitions: int | None = None
) -> tuple[list[float], list[float]]:
    """(acknowledgement latencies, end-to-end latencies) in ms, sorted, at `rate` records/s
    over the topic's `partitions` (default PARTITIONS), read by a consumer from their end."""
    total = int(rate * seconds)
    tps = [TopicPartition(topic, p) for p in range(partitions or PARTITIONS)]
    sent_at: dict[bytes, int] = {}
    acked: list[float] = []
    seen: list[float] = []
    ready = threading.Event()

    def read() -> None:
        with Consumer(bootstrap_servers=address, fetch_max_wait_ms=100) as consumer:
            consumer.assign(tps)
            for tp in tps:
                consumer.position(tp)  # at the end, before the first send
            ready.set()
            deadline = time.monotonic() + seconds + 30
            while len(seen) < total and time.monotonic() < deadline:
                for batch in consumer.poll(timeout_ms=200).values():
                    now = time.perf_counter_ns()
                    seen.extend((now - sent_at[r.value[:12]]) / 1e6 for r in batch)

    def on_ack(t0: int) -> Callable[[object, BaseException | None], None]:
        def done(metadata: object, error: BaseException | None) -> None:
            if error is None:
                acked.append((time.perf_counter_ns() - t0) / 1e6)

        return done

    reader = threading.Thread(target=read, name="latency-consumer")
    reader.start()
    ready.wait(WAIT_S)
    with Producer(bootstrap_servers=address, acks=acks) as producer:
        start = time.perf_counter()
        for i in range(total):
            pause = start + i / rate - time.perf_counter()
            if pause > 0:
                time.sleep(pause)
            key = b"%012d" % i
            t0 = sent_at[key] = time.perf_counter_ns()
            value = key + b"x" * (VALUE_SIZE - len(key))
            producer.send(topic, value, callback=on_ack(t0))
        producer.flush()
    reader.join(seconds + 60)
    return sorted(acked), sorted(seen)


def describe_partition(address: str, topic: str, partition: int):
    with AdminClient(bootstrap_servers=address, request_timeout_ms=5000) as admin:
        return admin.describe_topics([topic])[topic].partitions[partition]


def failover_once(cluster: LocalCluster, topic: str, rate: int = 500) -> float | None:
    """Kill -9 the leader of partition 0 under load; seconds to the first acknowledgement of
    a record sent after the kill (None: none within WAIT_S). Restarts the node afterwards."""
    address = cluster.gateway_address
    leader = describe_partition(address, topic, 0).leader
    killed_at: list[float] = []
    first: list[float] = []
    stop = threading.Event()

    def on_ack(sent: float) -> Callable[[object, BaseException | None], None]:
        def done(metadata: object, error: BaseException | None) -> None:
            if error is None and killed_at and sent >= killed_at[0] and not first:
                first.append(time.monotonic())

        return done

    with Producer(
        bootstrap_servers=address, acks="all", request_timeout_ms=5000, retry_backoff_max_ms=200
    ) as producer:
        producer.send(topic, b"warm-up", partition=0).result(30)

        def produce() -> None:
            while not stop.is_set():
                value = b"y" * VALUE_SIZE
                producer.send(topic, value, partition=0, callback=on_ack(time.monotonic()))
                time.sleep(1 / rate)

        thread = threading.Thread(target=produce, name="failover-producer")
        thread.start()
        time.sleep(1.0)
        killed_at.append(time.monotonic())
        cluster.storage(leader).kill()
        wait_until(lambda: bool(first), WAIT_S, interval=0.02)
        stop.set()
        thread.join(10)
    cluster.storage(leader).restart(timeout=WAIT_S)
    wait_until(lambda: len(describe_partition(address, topic, 0).isr) == 3, WAIT_S, 0.5)
    return first[0] - killed_at[0] if first else None


def main(argv: list[str] | None = None) -> None:
    global VALUE_SIZE, PARTITIONS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--latency-seconds", type=float, default=10.0)
    parser.add_argument("--failovers", type=int, default=5)
    parser.add_argument("--session-timeout-ms", type=int, default=3000)
    parser.add_argument("--value-size", type=int, default=VALUE_SIZE, help="bytes (at least 12)")
    parser.add_argument("--partitions", type=int, default=PARTITIONS)
    args = parser.parse_args(argv)
    VALUE_SIZE, PARTITIONS = max(args.value_size, 12), args.partitions
    extra = {
        "metadata": {
            "broker.session.timeout.ms": str(args.session_timeout_ms),
            "broker.heartbeat.interval.ms": "500",
        },
    }
    with (
        tempfile.TemporaryDirectory(prefix="riverlog-repl-bench-") as data_dir,
        LocalCluster(data_dir, storage_nodes=3, metadata_nodes=2, extra_config=extra) as cluster,
    ):
        address = cluster.gateway_address
        pids = {"client": os.getpid()}
        pids.update((n, p.pid) for n, p in sorted(cluster.processes.items()) if p.pid)
        print(f"cluster up: gateway {address}; broker.session.timeout.ms "
              f"{args.session_timeout_ms}")  # fmt: skip
        topic = ""
        for rf, acks in ((1, "1"), (3, "all")):
            topic = f"repl-bench-rf{rf}-{int(time.time())}"
            configs = {"min.insync.replicas": "2"} if rf == 3 else {}
            with AdminClient(bootstrap_servers=address) as admin:
                admin.create_topics([NewTopic(topic, PARTITIONS, rf, configs)])
            wait_until(lambda t=topic: describe_partition(address, t, 0).leader >= 0, WAIT_S)
            label = f"RF {rf}, acks={acks}"
            with measured(f"{label} produce", pids, args.records):
                rate = throughput(address, topic, acks, args.records)
            print(f"{label}: produce {rate:,.0f} records/s "
                  f"({args.records:,} x {VALUE_SIZE} B, {PARTITIONS} partitions)")  # fmt: skip
            if args.latency_seconds <= 0:
                continue
            ack_ms, e2e_ms = fixed_rate(address, topic, acks, args.rate, args.latency_seconds)
            print(f"{label}: at {args.rate:,} records/s for {args.latency_seconds:g} s: "
                  f"ack p50 {percentile(ack_ms, 0.5):.1f} ms, p99 {percentile(ack_ms, 0.99):.1f} "
                  f"ms, max {max(ack_ms, default=float('nan')):.1f} ms ({len(ack_ms):,} acked); "
                  f"end-to-end p50 {percentile(e2e_ms, 0.5):.1f} ms, "
                  f"p99 {percentile(e2e_ms, 0.99):.1f} ms ({len(e2e_ms):,} seen)")  # fmt: skip
        times: list[float] = []
        for i in range(args.failovers):
            took = failover_once(cluster, topic)
            shown = "no acknowledged produce" if took is None else f"{took:.2f} s"
            print(f"failover {i + 1}: leader kill -9 -> first acknowledged produce: {shown}")
            if took is not None:
                times.append(took)
        if times:
            print(f"failover (RF 3, acks=all, session timeout {args.session_timeout_ms} ms): "
                  f"p50 {statistics.median(times):.2f} s, max {max(times):.2f} s "
                  f"over {len(times)}/{args.failovers} rounds")  # fmt: skip


if __name__ == "__main__":
    main()
