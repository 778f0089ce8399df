"""What ACLs cost, in process and against a real local cluster. Prints figures; not a test.

0. The decision itself, in process: `Authorizer.authorize` with 1,000 literal and 100 prefixed
   bindings over 10 prefix lengths, a cache hit (the produce/fetch steady state) and a miss
   (the index lookups), microseconds per decision.
1. Throughput: a cluster (etcd, one metadata instance, two storage nodes, one gateway); one SDK
   producer sends N records (default 200,000) of 100-byte values, then one consumer reads them
   back, alternately with no ACL at all (the authorizer dormant, as before ACLs) and with ACLs
   enforced (ALLOW WRITE and READ on the topic and ALTER on the cluster for User:ANONYMOUS
   among 1,100 unrelated bindings, so every partition of every request is decided). Best of
   `--rounds` each.
2. Per request: produce requests of one record, 32 in flight for 5 s (requests/s and the
   gateway's CPU per request), where the gateway's per-request work is what limits.
3. Latency: `latency_probe.measure` (1,000 records/s for `--latency-seconds`, SDK defaults,
   acks=1, a consumer in its own process), alternately without and with ACLs: send → ack and
   send → poll() p50 / p99 of every run.

    .venv/bin/python bench/acl_bench.py [--records N] [--rounds 3] [--latency-seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from latency_probe import measure, summary
from quota_bench import _cpu_seconds, _request_run, _runs

from riverlog.client import AdminClient, Consumer, Producer, TopicPartition
from riverlog.cluster import LocalCluster
from riverlog.common.acl.authorizer import AclIndex, Authorizer
from riverlog.common.acl.model import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermission,
    PatternType,
    ResourcePattern,
    ResourceType,
)

TOPIC = "quota-bench"  # quota_bench's request loop produces to this name
LATENCY_PREFIX = "acl-latency-"  # a topic per latency run (its reader starts at the earliest)
PARTITIONS = 4


def _binding(
    name: str, op: AclOperation, principal: str, pattern=PatternType.LITERAL
) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.TOPIC, name, pattern),
        AccessControlEntry(principal, "*", op, AclPermission.ALLOW),
    )


def unrelated(n: int = 1000, prefixes: int = 100) -> list[AclBinding]:
    out = [_binding(f"other-{i}", AclOperation.READ, f"User:u{i % 50}") for i in range(n)]
    out += [
        _binding("p" * (1 + i % 10) + str(i), AclOperation.WRITE, "User:p", PatternType.PREFIXED)
        for i in range(prefixes)
    ]
    return out


def decision_cost(decisions: int = 200_000) -> None:
    bindings = [*unrelated(), _binding(TOPIC, AclOperation.WRITE, "User:ANONYMOUS")]
    index = AclIndex(bindings)
    print(f"decision cost, in process ({len(index)} bindings, best of 3):")
    for label, fresh in (("cache hit", False), ("cache miss (index)", True)):
        best = float("inf")
        for _ in range(3):
            authorizer = Authorizer(index)
            start = time.perf_counter()
            for i in range(decisions):
                name = f"{TOPIC}{i}" if fresh else TOPIC
                authorizer.authorize(
                    "User:ANONYMOUS", "127.0.0.1", AclOperation.WRITE, ResourceType.TOPIC, name
                )
            best = min(best, (time.perf_counter() - start) / decisions * 1e6)
        print(f"  {label + ':':24s}{best:8.2f} us")


def produce_run(bootstrap: str, records: int) -> float:
    value = b"v" * 100
    with Producer({"bootstrap.servers": bootstrap, "client.id": "bench", "linger.ms": 5}) as p:
        start = time.perf_counter()
        for i in range(records):
            p.send(TOPIC, value, partition=i % PARTITIONS)
        p.flush()
        return records / (time.perf_counter() - start)


def consume_run(bootstrap: str, records: int) -> float:
    config = {"bootstrap.servers": bootstrap, "auto.offset.reset": "latest"}
    with Consumer(config) as consumer:
        tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = {tp: consumer.position(tp) for tp in tps}
        for tp in tps:
            consumer.seek(tp, max(ends[tp] - records // PARTITIONS, 0))
        count = 0
        start = time.perf_counter()
        while count < records - PARTITIONS:
            for batch in consumer.poll(timeout_ms=1000).values():
                count += len(batch)
        return count / (time.perf_counter() - start)


def set_acls(admin: AdminClient, on: bool) -> None:
    if on:
        admin.create_acls(
            [
                *unrelated(),
                *(
                    _binding(name, op, "User:ANONYMOUS", pattern)
                    for name, pattern in (
                        (TOPIC, PatternType.LITERAL),
                        (LATENCY_PREFIX, PatternType.PREFIXED),
                    )
                    for op in (AclOperation.WRITE, AclOperation.READ)
                ),
                AclBinding(  # so this admin client may take them away again
                    ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME),
                    AccessControlEntry(
                        "User:ANONYMOUS", "*", AclOperation.ALTER, AclPermission.ALLOW
                    ),
                ),
            ]
        )
    else:
        admin.delete_acls([AclBindingFilter()])
    time.sleep(0.5)  # the gateway's push; a benchmark, not a test


def throughput(cluster: LocalCluster, records: int, rounds: int) -> None:
    bootstrap = cluster.gateway_addresses[0]
    produce_run(bootstrap, records // 5)  # warm the path
    results: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for _ in range(rounds):
            for on in (False, True):
                set_acls(admin, on)
                results[on].append(
                    (produce_run(bootstrap, records), consume_run(bootstrap, records))
                )
            set_acls(admin, False)
    print(f"throughput: {records} x 100 B, acks=1, best of {rounds}")
    for on in (False, True):
        label = "ACLs enforced:" if on else "no ACLs (dormant):"
        p = max(r[0] for r in results[on])
        c = max(r[1] for r in results[on])
        print(f"  {label:24s}produce {p:10,.0f} records/s, consume {c:10,.0f} records/s")
        produced, consumed = _runs([r[0] for r in results[on]]), _runs([r[1] for r in results[on]])
        print(f"  {'':24s}runs {produced} / {consumed}")


def request_overhead(cluster: LocalCluster, rounds: int, seconds: float = 5.0) -> None:
    address = cluster.gateway_addresses[0]
    pid = cluster.gateway(1).pid or 0
    asyncio.run(_request_run(address, 1.0))
    rates: dict[bool, list[float]] = {False: [], True: []}
    cpu: dict[bool, list[float]] = {False: [], True: []}
    with AdminClient({"bootstrap.servers": address}) as admin:
        for _ in range(rounds):
            for on in (False, True):
                set_acls(admin, on)
                before = _cpu_seconds(pid)
                rate = asyncio.run(_request_run(address, seconds))
                rates[on].append(rate)
                cpu[on].append((_cpu_seconds(pid) - before) / (rate * seconds) * 1e6)
            set_acls(admin, False)
    print(f"per request: 1-record produce requests, 32 in flight, {seconds:.0f} s runs")
    for on in (False, True):
        label = "ACLs enforced:" if on else "no ACLs (dormant):"
        print(
            f"  {label:24s}{max(rates[on]):8,.0f} requests/s (runs {_runs(rates[on], 1)}),"
            f" gateway CPU {min(cpu[on]):.0f} us per request"
        )


def latency(cluster: LocalCluster, rounds: int, seconds: float) -> None:
    bootstrap = cluster.gateway_addresses[0]
    runs_of = [(r, on) for r in range(rounds) for on in (False, True)]
    topics = {(r, on): f"{LATENCY_PREFIX}{r}-{int(on)}" for r, on in runs_of}
    for name in topics.values():  # before any ACL: creating needs no CREATE binding then
        cluster.create_topic(name, partitions=1)
    runs: dict[bool, list[tuple[list[int], list[int]]]] = {False: [], True: []}
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for r in range(rounds):
            for on in (False, True):
                set_acls(admin, on)
                acks, e2e, _ = measure(bootstrap, topics[r, on], seconds=seconds)
                runs[on].append((acks, e2e))
            set_acls(admin, False)
    print(f"latency: 1,000 records/s for {seconds:g} s, acks=1, SDK defaults, per run")
    for on in (False, True):
        label = "ACLs enforced:" if on else "no ACLs (dormant):"
        for acks, e2e in runs[on]:
            print(f"  {label:24s}{summary('ack', acks)}; {summary('e2e', e2e)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-seconds", type=float, default=5.0)
    args = parser.parse_args()
    decision_cost()
    with tempfile.TemporaryDirectory(prefix="riverlog-acl-bench-") as tmp:
        with LocalCluster(Path(tmp), storage_nodes=2, metadata_nodes=1, gateways=1) as cluster:
            cluster.create_topic(TOPIC, partitions=PARTITIONS)
            throughput(cluster, args.records, args.rounds)
            request_overhead(cluster, args.rounds)
            latency(cluster, args.rounds, args.latency_seconds)


if __name__ == "__main__":
    main()
