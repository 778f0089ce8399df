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
- with one partition, ack → poll record by record (the fetch half alone);

p50 / p99 / max of each, so a change can be placed on the half it moves. `--reps` alternates
nothing: run it against two clusters (or one cluster restarted with other code) to compare;
the producer and consumer are this checkout's, so two checkouts against one cluster compare
client changes.

`--grpc-fetch` reads with a plain gRPC client instead of the SDK consumer: ONE Fetch request
over every partition at a time (min_bytes 1, max_wait 500 ms), as a client without the SDK
does, so a request spans all leaders. With `--data-dir DATA_DIR` (the cluster's, `riverlog
cluster up --data-dir`) the run also prints the connections the storage nodes accepted on their
zero-copy ports during it (`riverlog_zero_copy_connections_total`, scraped).

`--hops DATA_DIR` (a cluster started by `riverlog cluster up --data-dir DATA_DIR`) instead
times one 100-byte record at a time, 100 per second, over three paths that each add a hop:
the leader's produce lane alone (its zero-copy port, as the gateway uses it), a raw
ProduceStream message through the gateway, and the SDK's `send().result()`.

    .venv/bin/python bench/latency_probe.py --bootstrap 127.0.0.1:PORT [--partitions 1]
        [--rate 1000] [--seconds 5] [--linger-ms N] [--reps 3] [--pid PID ...]
        [--hops DATA_DIR] [--grpc-fetch] [--data-dir DATA_DIR] [--fetch-push-credit N]
        [--no-direct]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import queue
import struct
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
from bench_common import zero_copy_ports
from prometheus_client.parser import text_string_to_metric_families

from riverlog.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from riverlog.cluster import STATE_FILE
from riverlog.common.records import BatchBuilder, iter_batches_records
from riverlog.common.zerocopy import AsyncProduceLane
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2, gateway_pb2_grpc

_STAMP = struct.Struct("<Q")


def _consume(
    address: str,
    topic: str,
    partitions: int,
    expected: int,
    ready: Any,
    out: Any,
    client: dict[str, object] | None = None,
) -> None:
    latencies: list[int] = []
    deadline = time.monotonic() + 60
    conf = {**(client or {}), "bootstrap.servers": address, "auto.offset.reset": "earliest"}
    with Consumer(conf) as consumer:
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


def _fetch_grpc(
    address: str, topic: str, partitions: int, expected: int, ready: Any, out: Any
) -> None:
    """`_consume` with one plain gRPC Fetch over every partition at a time, no SDK."""
    latencies: list[int] = []
    deadline = time.monotonic() + 60
    positions = dict.fromkeys(range(partitions), 0)
    with grpc.insecure_channel(address) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)

        def request() -> data_pb2.FetchRequest:
            return data_pb2.FetchRequest(
                max_wait_ms=500,
                min_bytes=1,
                max_bytes=4 << 20,
                partitions=[
                    data_pb2.FetchPartition(
                        topic=topic, partition=p, fetch_offset=o, partition_max_bytes=1 << 20
                    )
                    for p, o in positions.items()
                ],
            )

        stub.Fetch(request(), timeout=30)  # the channel is up and the leaders are known
        ready.set()
        while len(latencies) < expected and time.monotonic() < deadline:
            response = stub.Fetch(request(), timeout=30)
            now = time.monotonic_ns()
            for part in response.partitions:
                if part.error_code:
                    continue  # asked again next round
                for record in iter_batches_records(part.records, positions[part.partition]):
                    positions[part.partition] = record.offset + 1
                    sent = _STAMP.unpack_from(record.value or b"")[0]
                    if sent:  # not the warm-up record
                        latencies.append(now - sent)
    out.put(latencies)


def _zero_copy_connections(data_dir: str | None) -> int | None:
    """Connections the cluster's storage nodes accepted on their zero-copy ports so far."""
    if data_dir is None:
        return None
    state = json.loads((Path(data_dir) / STATE_FILE).read_text())
    total = 0.0
    for process in state["processes"]:
        address = process["info"].get("metrics_address")
        if process["role"] != "storage" or not address:
            continue
        with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as response:
            text = response.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "riverlog_zero_copy_connections_total":
                    total += sample.value
    return int(total)


def summary(name: str, values_ns: list[int]) -> str:
    """`name p50 .. p99 .. max .. ms` of latencies in nanoseconds."""
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


def measure(
    bootstrap: str,
    topic: str,
    *,
    partitions: int = 1,
    rate: int = 1000,
    seconds: float = 5.0,
    linger_ms: int | None = None,
    value_size: int = 100,
    grpc_fetch: bool = False,
    client: dict[str, object] | None = None,
    pids: list[int] | None = None,
    consumer: dict[str, object] | None = None,
    on_ready: Callable[[], object] | None = None,
    producer_settings: dict[str, object] | None = None,
) -> tuple[list[int], list[int], dict[int, float]]:
    """Send `rate` records/s to `topic` (it exists) for `seconds` with the SDK (acks=1) while
    a reader in another process polls them: (send → ack latencies, send → poll latencies, in
    ns; CPU/wall of this process and of `pids`). `client`: more SDK settings for both sides
    (TLS, credentials); the `grpc_fetch` reader is plaintext only. `on_ready` is called once
    the reader is connected, before the producer starts. `consumer`: more settings of the
    SDK reader only; `producer_settings` of the producer only."""
    if grpc_fetch and (client or consumer):
        raise ValueError("the gRPC Fetch reader takes no client settings")
    total = int(rate * seconds)
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    out = ctx.Queue()
    reader_args: tuple[object, ...] = (bootstrap, topic, partitions, total, ready, out)
    if not grpc_fetch:
        reader_args += ({**(client or {}), **(consumer or {})},)
    reader = ctx.Process(target=_fetch_grpc if grpc_fetch else _consume, args=reader_args)
    reader.start()
    ready.wait(60)
    time.sleep(0.5)
    if on_ready is not None:
        on_ready()
    settings: dict[str, object] = {
        **(client or {}),
        **(producer_settings or {}),
        "bootstrap.servers": bootstrap,
        "acks": "1",
    }
    if linger_ms is not None:
        settings["linger.ms"] = linger_ms
    acks: list[int] = []
    padding = b"x" * (value_size - _STAMP.size)
    with Producer(settings) as producer:
        producer.send(topic, _STAMP.pack(0) + padding, partition=0).result(30)  # warm up
        start = time.monotonic_ns() + 5_000_000
        cpu = {pid: _cpu_seconds(pid) for pid in [os.getpid(), *(pids or [])]}
        period = int(1e9 / rate)
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
    return acks, latencies, cpu


def run_once(args: argparse.Namespace, rep: int) -> str:
    topic = f"probe-{int(time.time())}-{rep}"
    with AdminClient(bootstrap_servers=args.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, args.partitions, 1)])
    total = int(args.rate * args.seconds)
    connections_before: list[int | None] = [None]

    def count_connections() -> None:
        connections_before[0] = _zero_copy_connections(args.data_dir)

    acks, latencies, cpu = measure(
        args.bootstrap,
        topic,
        partitions=args.partitions,
        rate=args.rate,
        seconds=args.seconds,
        linger_ms=args.linger_ms,
        value_size=args.value_size,
        grpc_fetch=args.grpc_fetch,
        pids=args.pid,
        consumer={
            **({"fetch.push.credit": args.fetch_push_credit} if args.fetch_push_credit else {}),
            **({"direct.access": False} if args.no_direct else {}),
        },
        on_ready=count_connections,
        producer_settings=(
            {"direct.access": args.producer_direct_access} if args.producer_direct_access else None
        ),
    )
    connections = ""
    if connections_before[0] is not None:
        opened = (_zero_copy_connections(args.data_dir) or 0) - connections_before[0]
        connections = f"; {opened} zero-copy connections opened"
    if args.partitions == 1 and len(acks) == len(latencies):
        # Record by record (one partition: both in offset order): from the producer's ack to
        # the consumer's poll, the fetch half alone.
        connections += "; " + summary(
            "poll-ack", [e - a for e, a in zip(latencies, acks, strict=True)]
        )
    linger = "default" if args.linger_ms is None else args.linger_ms
    reader_kind = "gRPC Fetch" if args.grpc_fetch else "SDK consumer"
    direct = args.producer_direct_access
    return (
        f"{args.partitions} partition(s), {reader_kind}, linger.ms {linger}, {args.rate}/s"
        f"{'' if direct is None else ', producer direct.access ' + direct}: "
        f"{summary('ack', acks)}; {summary('e2e', latencies)} ({len(latencies)}/{total}); "
        "CPU/wall " + " ".join(f"{pid}:{share:.2f}" for pid, share in cpu.items()) + connections
    )


def _timed(name: str, count: int, one: Callable[[], object]) -> str:
    """`one()` `count` times, 10 ms apart; its durations' summary."""
    took = []
    for _ in range(count):
        start = time.monotonic_ns()
        one()
        took.append(time.monotonic_ns() - start)
        time.sleep(0.01)
    return summary(name, took)


def hops(args: argparse.Namespace) -> None:
    """One record at a time over the leader's lane, the gateway's stream, and the SDK."""
    ports = zero_copy_ports(args.hops)
    topic = f"hops-{int(time.time())}"
    with AdminClient(bootstrap_servers=args.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    value = b"x" * args.value_size
    direct = {"direct.access": args.producer_direct_access} if args.producer_direct_access else {}
    with Producer(direct, bootstrap_servers=args.bootstrap, acks="1") as producer:
        producer.send(topic, value).result(30)  # the topic has a leader now
        channel = grpc.insecure_channel(args.bootstrap)
        stub = gateway_pb2_grpc.GatewayStub(channel)
        metadata = stub.GetMetadata(gateway_pb2.GetMetadataRequest(topics=[topic]))
        leader = metadata.topics[0].partitions[0].leader

        def request() -> data_pb2.ProduceRequest:
            builder = BatchBuilder()
            builder.append(int(time.time() * 1000), None, value)
            part = data_pb2.ProducePartition(topic=topic, partition=0, records=builder.build())
            return data_pb2.ProduceRequest(
                acks=common_pb2.ACKS_LEADER, timeout_ms=30_000, partitions=[part]
            )

        async def on_lane() -> str:
            lane = AsyncProduceLane("127.0.0.1", ports[leader])
            took = []
            for _ in range(args.hop_count):
                start = time.monotonic_ns()
                await lane.produce(request(), 30)
                took.append(time.monotonic_ns() - start)
                await asyncio.sleep(0.01)
            await lane.close()
            return summary("leader's produce lane", took)

        print(asyncio.run(on_lane()), flush=True)
        requests: queue.SimpleQueue[data_pb2.ProduceRequest | None] = queue.SimpleQueue()

        def fed() -> Iterator[data_pb2.ProduceRequest]:
            while (item := requests.get()) is not None:
                yield item

        answers = stub.ProduceStream(fed())
        ids = iter(range(1, 1 << 62))

        def on_stream() -> object:
            message = request()
            message.correlation_id = next(ids)
            requests.put(message)
            return next(answers)

        print(_timed("gateway's ProduceStream", args.hop_count, on_stream), flush=True)
        requests.put(None)
        channel.close()
        print(
            _timed(
                "SDK send().result()",
                args.hop_count,
                lambda: producer.send(topic, value).result(30),
            ),
            flush=True,
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
    parser.add_argument("--hops", metavar="DATA_DIR", help="time the hops of one record instead")
    parser.add_argument("--hop-count", type=int, default=300)
    parser.add_argument(
        "--fetch-push-credit", type=int, default=0, help="the SDK reader's fetch.push.credit"
    )
    parser.add_argument(
        "--grpc-fetch", action="store_true", help="read with one plain gRPC Fetch at a time"
    )
    parser.add_argument(
        "--no-direct", action="store_true", help="the SDK reader with direct.access=false"
    )
    parser.add_argument(
        "--data-dir", help="the cluster's data dir: count zero-copy connections opened"
    )
    parser.add_argument(
        "--producer-direct-access",
        choices=["true", "false"],
        help="the producer's direct.access (default: the SDK's, true; decision 0047)",
    )
    args = parser.parse_args()
    if args.hops:
        hops(args)
        return
    for rep in range(args.reps):
        print(run_once(args, rep), flush=True)


if __name__ == "__main__":
    main()
