"""End-to-end latency at a fixed rate against a running cluster, split into its two halves.
Prints figures; not a test.

The shape of the side-by-side harness's latency run (`../shared/bench-peers/`): the producer
sends `--rate` records/s in this process with the SDK (acks=1, linger.ms as given or the SDK's
default); a consumer in another process (spawned, Kafka's consumer defaults, every partition
assigned) polls them. Each value starts with the producer's CLOCK_MONOTONIC time at send. It
prints, per run:

- send → acknowledgement (the producer's callback), the producer → gateway → leader half and
  back;
- send → poll() hands the record over (end to end);

p50 / p99 / max of each, so a change can be placed on the half it moves. `--reps` alternates
nothing: run it against two clusters (or one cluster restarted with other code) to compare.

    .venv/bin/python bench/latency_probe.py --bootstrap 127.0.0.1:PORT [--partitions 1]
        [--rate 1000] [--seconds 5] [--linger-ms N] [--reps 3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import struct
import time
from typing import Any

from riverlog.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition

_STAMP = struct.Struct("<Q")


def _consume(
    address: str, topic: str, partitions: int, expected: int, ready: Any, out: Any
) -> None:
    latencies: list[int] = []
    deadline = time.monotonic() + 60
    with Consumer({"bootstrap.servers": address, "auto.offset.reset": "earliest"}) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        for tp in tps:
            consumer.position(tp)
        consumer.poll(timeout_ms=0)
        ready.set()
        while len(latencies) < expected and time.monotonic() < deadline:
            polled = consumer.poll(timeout_ms=200)
            now = time.monotonic_ns()
            for batch in polled.values():
                for record in batch:
                    sent = _STAMP.unpack_from(record.value)[0]
                    if sent:  # not the warm-up record
                        latencies.append(now - sent)
    out.put(latencies)


def _summary(name: str, values_ns: list[int]) -> str:
    if not values_ns:
        return f"{name}: none"
    values = sorted(v / 1e6 for v in values_ns)

    def at(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]

    return f"{name} p50 {at(0.5):.2f} p99 {at(0.99):.2f} max {values[-1]:.2f} ms"


def _cpu_seconds(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(args: argparse.Namespace, rep: int) -> str:
    topic = f"probe-{int(time.time())}-{rep}"
    with AdminClient(bootstrap_servers=args.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, args.partitions, 1)])
    total = int(args.rate * args.seconds)
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    out = ctx.Queue()
    reader = ctx.Process(
        target=_consume, args=(args.bootstrap, topic, args.partitions, total, ready, out)
    )
    reader.start()
    ready.wait(60)
    time.sleep(0.5)
    settings: dict[str, object] = {"bootstrap.servers": args.bootstrap, "acks": "1"}
    if args.linger_ms is not None:
        settings["linger.ms"] = args.linger_ms
    acks: list[int] = []
    padding = b"x" * (args.value_size - _STAMP.size)
    with Producer(settings) as producer:
        producer.send(topic, _STAMP.pack(0) + padding, partition=0).result(30)  # warm up
        start = time.monotonic_ns() + 5_000_000
        cpu = {pid: _cpu_seconds(pid) for pid in [os.getpid(), *args.pid]}
        period = int(1e9 / args.rate)
        for i in range(total):
            due = start + i * period
            now = time.monotonic_ns()
            if now < due:
                time.sleep((due - now) / 1e9)
            sent = time.monotonic_ns()
            producer.send(
                topic,
                _STAMP.pack(sent) + padding,
                callback=lambda _m, _e, sent=sent: acks.append(time.monotonic_ns() - sent),
            )
        producer.flush(30)
        wall = (time.monotonic_ns() - start) / 1e9
        cpu = {pid: (_cpu_seconds(pid) - used) / wall for pid, used in cpu.items()}
    latencies = out.get(timeout=90)
    reader.join(10)
    linger = "default" if args.linger_ms is None else args.linger_ms
    return (
        f"{args.partitions} partition(s), linger.ms {linger}, {args.rate}/s: "
        f"{_summary('ack', acks)}; {_summary('e2e', latencies)} ({len(latencies)}/{total}); "
        "CPU/wall " + " ".join(f"{pid}:{share:.2f}" for pid, share in cpu.items())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--rate", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--linger-ms", type=int, default=None, help="default: the SDK's")
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--pid", type=int, action="append", default=[], help="print its CPU/wall")
    args = parser.parse_args()
    for rep in range(args.reps):
        print(run_once(args, rep), flush=True)


if __name__ == "__main__":
    main()
