"""What quotas cost and how well they hold, against a real local cluster. Prints figures; not
a test.

Starts a cluster with the launcher (etcd, one metadata instance, two storage nodes, a quota
instance, two gateways), then:

0. The quota path's own cost per produce request, measured in process (microseconds).
1. Overhead: produces N records (default 300,000) of 100-byte values with one SDK producer
   through gateway 1, alternately with no quota configured and with quotas configured that the
   client does not reach (a producer_byte_rate and request_percentage for the default user and
   a byte rate for the default client-id, so every request is resolved, recorded, reported and
   judged). Best of `--rounds` runs each; prints records/s and the difference. Then the same
   with produce requests of one record each, 32 in flight over 5 s (requests/s): there the
   gateway's per-request work, where quota accounting happens, is what limits.
2. Accuracy: for 1, 10 and 100 entities (client-ids, each with its own producer_byte_rate),
   every entity pushes 10 kB batches as fast as it can through both gateways at once (one
   request in flight per gateway, honouring throttle_time_ms as the SDK does). After a warm-up
   of 13 s (Kafka's padded window admits a burst at first), accepted bytes are counted for
   20 s; prints measured rate / quota per entity (mean, min, max).

    .venv/bin/python bench/quota_bench.py [--records N] [--rounds 3] [--measure-seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

import grpc

from riverlog.client import AdminClient, Producer
from riverlog.cluster import LocalCluster
from riverlog.common.quota.entity import DEFAULT, QuotaEntity
from riverlog.common.records.builder import BatchBuilder
from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2_grpc

_TICKS = os.sysconf("SC_CLK_TCK")
TOPIC = "quota-bench"
PARTITIONS = 4
NOT_HIT = [
    (QuotaEntity(DEFAULT, None), {"producer_byte_rate": 1e12, "request_percentage": 1e6}),
    (QuotaEntity(None, DEFAULT), {"producer_byte_rate": 1e12}),
]
# (entities, quota per entity in bytes/s): about 5 MB/s in all at most, which 2 cores carry
ACCURACY_CASES = [(1, 1_000_000.0), (10, 200_000.0), (100, 40_000.0)]


def path_cost(requests: int = 200_000) -> None:
    """Microseconds the gateway's quota path adds to one produce request, in process: the
    hold check and the byte record before forwarding, the request-time record after."""
    from riverlog.common.clock import SystemClock
    from riverlog.common.quota import LocalQuotaView, QuotaResolver
    from riverlog.services.gateway.context import Deadline, RequestContext
    from riverlog.services.gateway.quotas import GatewayQuotas

    ctx = RequestContext("Produce", Deadline.after(600), client_id="app", principal="ANONYMOUS")
    configs = {e.path: dict(values) for e, values in NOT_HIT}

    async def run(quotas: GatewayQuotas) -> float:
        start = time.perf_counter()
        for _ in range(requests):
            throttle = await quotas.before_produce(ctx, 1000)
            quotas.after_request(ctx, throttle, 50_000)
        return (time.perf_counter() - start) / requests * 1e6

    print(f"quota path per produce request, in process ({requests:,} requests, best of 3):")
    for label, paths in (("no quotas", {}), ("quotas set, not hit", configs)):
        clock = SystemClock()
        quotas = GatewayQuotas(LocalQuotaView("gw", QuotaResolver(), clock), clock)
        quotas.update_resolver(QuotaResolver.from_paths(paths))
        best = min(asyncio.run(run(quotas)) for _ in range(3))
        print(f"  {label + ':':24s}{best:8.2f} us")


def produce_run(bootstrap: str, records: int) -> float:
    value = b"v" * 100
    with Producer({"bootstrap.servers": bootstrap, "client.id": "bench", "linger.ms": 5}) as p:
        start = time.perf_counter()
        for i in range(records):
            p.send(TOPIC, value, partition=i % PARTITIONS)
        p.flush()
        return records / (time.perf_counter() - start)


def set_quotas(admin: AdminClient, on: bool) -> None:
    admin.alter_client_quotas(
        [(entity, dict(values) if on else dict.fromkeys(values)) for entity, values in NOT_HIT]
    )


def overhead(cluster: LocalCluster, records: int, rounds: int) -> None:
    bootstrap = cluster.gateway_addresses[0]
    produce_run(bootstrap, records // 5)  # warm the path
    results: dict[bool, list[float]] = {False: [], True: []}
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for _ in range(rounds):
            for on in (False, True):
                set_quotas(admin, on)
                time.sleep(0.5)
                results[on].append(produce_run(bootstrap, records))
        set_quotas(admin, False)
    off, on = max(results[False]), max(results[True])
    print(f"overhead: {records} x 100 B, acks=1, best of {rounds}")
    print(f"  no quotas:              {off:10,.0f} records/s  (runs {_runs(results[False])})")
    print(f"  quotas set, not hit:    {on:10,.0f} records/s  (runs {_runs(results[True])})")
    print(f"  difference:             {100 * (off - on) / off:+.1f}%")


async def _request_run(address: str, seconds: float, concurrency: int = 32) -> float:
    """Produce requests/s of one small batch each (so the gateway's per-request work, where
    quota accounting happens, is what is measured), `concurrency` in flight."""
    records = _batch(records=1, size=100)
    channel = grpc.aio.insecure_channel(address)
    stub = gateway_pb2_grpc.GatewayStub(channel)
    request = data_pb2.ProduceRequest(
        acks=common_pb2.ACKS_LEADER,
        timeout_ms=30_000,
        partitions=[data_pb2.ProducePartition(topic=TOPIC, partition=0, records=records)],
    )
    metadata = ((CLIENT_ID_KEY, "bench-requests"),)
    done = 0
    deadline = time.monotonic() + seconds

    async def loop() -> None:
        nonlocal done
        while time.monotonic() < deadline:
            await stub.Produce(request, metadata=metadata, timeout=30)
            done += 1

    start = time.monotonic()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    elapsed = time.monotonic() - start
    await channel.close()
    return done / elapsed


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def request_overhead(cluster: LocalCluster, rounds: int, seconds: float = 5.0) -> None:
    address = cluster.gateway_addresses[0]
    pid = cluster.gateway(1).pid or 0
    asyncio.run(_request_run(address, 1.0))  # warm the path
    results: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    with AdminClient({"bootstrap.servers": address}) as admin:
        for _ in range(rounds):
            for on in (False, True):
                set_quotas(admin, on)
                time.sleep(0.5)
                before = _cpu_seconds(pid)
                rate = asyncio.run(_request_run(address, seconds))
                used = _cpu_seconds(pid) - before
                results[on].append(rate)
                cpu[on].append(used / (rate * seconds) * 1e6)
        set_quotas(admin, False)
    off, on = max(results[False]), max(results[True])
    cpu_off, cpu_on = min(cpu[False]), min(cpu[True])
    print(f"overhead per request: 1-record produce requests, 32 in flight, {seconds:.0f} s runs")
    print(f"  no quotas:              {off:10,.0f} requests/s  (runs {_runs(results[False], 1)})")
    print(f"  quotas set, not hit:    {on:10,.0f} requests/s  (runs {_runs(results[True], 1)})")
    print(f"  difference:             {100 * (off - on) / off:+.1f}%")
    print(f"  gateway CPU per request: {cpu_off:.0f} us vs {cpu_on:.0f} us (best run each)")


def _runs(values: list[float], scale: int = 1000) -> str:
    if scale == 1:
        return ", ".join(f"{v:.0f}" for v in values)
    return ", ".join(f"{v / 1000:.0f}k" for v in values)


def _batch(records: int = 10, size: int = 1000) -> bytes:
    builder = BatchBuilder()
    for i in range(records):
        builder.append(1_700_000_000_000 + i, None, b"q" * size)
    return builder.build()


async def _push(
    stub: gateway_pb2_grpc.GatewayStub,
    client_id: str,
    request: data_pb2.ProduceRequest,
    size: int,
    window: list[float],
    counts: dict[str, int],
    stop: asyncio.Event,
) -> None:
    metadata = ((CLIENT_ID_KEY, client_id),)
    while not stop.is_set():
        response = await stub.Produce(request, metadata=metadata, timeout=30)
        now = time.monotonic()
        if window[0] <= now < window[1] and response.partitions[0].error_code == 0:
            counts[client_id] += size
        if response.throttle_time_ms > 0:
            await asyncio.sleep(response.throttle_time_ms / 1000)


async def accuracy_case(
    cluster: LocalCluster, entities: int, quota: float, warm_up_s: float, measure_s: float
) -> list[float]:
    ids = [f"acc-{entities}-{i}" for i in range(entities)]
    with AdminClient({"bootstrap.servers": cluster.gateway_addresses[0]}) as admin:
        admin.alter_client_quotas(
            [(QuotaEntity(None, cid), {"producer_byte_rate": quota}) for cid in ids]
        )
    records = _batch()
    channels = [grpc.aio.insecure_channel(a) for a in cluster.gateway_addresses]
    stubs = [gateway_pb2_grpc.GatewayStub(c) for c in channels]
    start = time.monotonic()
    window = [start + warm_up_s, start + warm_up_s + measure_s]
    counts = dict.fromkeys(ids, 0)
    stop = asyncio.Event()
    tasks = []
    for n, cid in enumerate(ids):
        for g, stub in enumerate(stubs):
            partition = (n + g) % PARTITIONS
            request = data_pb2.ProduceRequest(
                acks=common_pb2.ACKS_LEADER,
                timeout_ms=30_000,
                partitions=[
                    data_pb2.ProducePartition(topic=TOPIC, partition=partition, records=records)
                ],
            )
            tasks.append(
                asyncio.create_task(_push(stub, cid, request, len(records), window, counts, stop))
            )
    await asyncio.sleep(warm_up_s + measure_s)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    for channel in channels:
        await channel.close()
    with AdminClient({"bootstrap.servers": cluster.gateway_addresses[0]}) as admin:
        admin.alter_client_quotas(
            [(QuotaEntity(None, cid), {"producer_byte_rate": None}) for cid in ids]
        )
    return [counts[cid] / measure_s / quota for cid in ids]


def accuracy(cluster: LocalCluster, warm_up_s: float, measure_s: float) -> None:
    print(f"accuracy: measured rate / quota per entity, {measure_s:.0f} s after {warm_up_s:.0f} s")
    for entities, quota in ACCURACY_CASES:
        ratios = asyncio.run(accuracy_case(cluster, entities, quota, warm_up_s, measure_s))
        print(
            f"  {entities:3d} entities x {quota / 1000:6.0f} kB/s:"
            f" mean {statistics.mean(ratios):.3f}  min {min(ratios):.3f}  max {max(ratios):.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warm-up-seconds", type=float, default=13.0)
    parser.add_argument("--measure-seconds", type=float, default=20.0)
    parser.add_argument("--skip-overhead", action="store_true")
    parser.add_argument("--skip-records", action="store_true", help="only the per-request run")
    parser.add_argument("--skip-accuracy", action="store_true")
    args = parser.parse_args()
    if not args.skip_overhead:
        path_cost()
    with tempfile.TemporaryDirectory(prefix="riverlog-quota-bench-") as data_dir:
        cluster = LocalCluster(
            data_dir, storage_nodes=2, metadata_nodes=1, gateways=2, quota_nodes=1
        )
        with cluster:
            cluster.create_topic(TOPIC, partitions=PARTITIONS)
            if not args.skip_overhead:
                if not args.skip_records:
                    overhead(cluster, args.records, args.rounds)
                request_overhead(cluster, args.rounds)
            if not args.skip_accuracy:
                accuracy(cluster, args.warm_up_seconds, args.measure_seconds)


if __name__ == "__main__":
    main()
