"""Plain gRPC produce (no SDK): ProduceRecords with 1,000 records of 100 bytes per call, one
call at a time, as a client without the SDK sends them (and as the side-by-side harness's
`riverlog-grpc` row does). Prints figures; not a test.

Starts a cluster with the launcher (etcd, one metadata instance, one storage node by default,
one gateway), creates a topic of 1 partition (`--partitions`) with replication factor 1, sends
one warm-up record, then runs `--rounds` rounds of `--records` records each and prints, per
round, records/s and the CPU microseconds per record of the client, the gateway and the storage
node (which hold better than rates on a machine shared with other work). Every result is
checked (no error, offsets in sequence on a 1-partition topic).

    .venv/bin/python bench/plain_produce_bench.py [--records 200000] [--rounds 3]
        [--per-call 1000] [--value-size 100] [--partitions 1] [--storage-nodes 1]
        [--acks 1|all] [--bootstrap host:port]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import grpc
from bench_common import announce
from produce_consume_bench import measured

from riverlog.client import AdminClient, NewTopic
from riverlog.cluster import LocalCluster
from riverlog.v1 import common_pb2, gateway_pb2, gateway_pb2_grpc

TOPIC = "plain-produce"


def payloads_of(args: argparse.Namespace) -> list[bytes]:
    """The values of one round, made before it is timed (as the harness makes them)."""
    return [i.to_bytes(8, "big") + b"x" * (args.value_size - 8) for i in range(args.records)]


def produce(
    stub: gateway_pb2_grpc.GatewayStub,
    args: argparse.Namespace,
    start: int,
    payloads: list[bytes],
) -> int:
    """`payloads` in calls of `args.per_call`; returns the next expected offset."""
    Rec = common_pb2.Record
    Req = gateway_pb2.ProduceRecordsRequest
    acks = common_pb2.ACKS_ALL if args.acks == "all" else common_pb2.ACKS_LEADER
    expected, bad = start, 0
    call = stub.ProduceRecords
    for i in range(0, args.records, args.per_call):
        request = Req(
            topic=TOPIC,
            acks=acks,
            timeout_ms=30_000,
            records=[Rec(value=v, has_value=True) for v in payloads[i : i + args.per_call]],
        )
        response = call(request, timeout=60)
        for result in response.results:
            if result.error_code or (args.partitions == 1 and result.offset != expected):
                bad += 1
            expected += 1
    if bad:
        print(f"  {bad} bad results")
    return expected


def run(address: str, pids: dict[str, int], args: argparse.Namespace) -> None:
    with AdminClient(bootstrap_servers=address) as admin:
        admin.create_topics([NewTopic(TOPIC, args.partitions, 1)])
    with grpc.insecure_channel(address) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        deadline = time.monotonic() + 60
        while True:  # the warm-up record, once the partition has a leader
            [result] = stub.ProduceRecords(
                gateway_pb2.ProduceRecordsRequest(
                    topic=TOPIC, records=[common_pb2.Record(value=b"warm", has_value=True)]
                ),
                timeout=30,
            ).results
            if result.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        expected = 1
        payloads = payloads_of(args)
        for round_ in range(args.rounds):
            start = time.perf_counter()
            with measured(f"round {round_ + 1}", pids, args.records):
                expected = produce(stub, args, expected, payloads)
            rate = args.records / (time.perf_counter() - start)
            print(f"round {round_ + 1}: {rate:,.0f} records/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-call", type=int, default=1000)
    parser.add_argument("--value-size", type=int, default=100, help="bytes (at least 8)")
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--storage-nodes", type=int, default=1)
    parser.add_argument("--acks", choices=("1", "all"), default="1")
    parser.add_argument("--bootstrap", help="use this running cluster's gateway instead")
    args = parser.parse_args()
    args.value_size = max(args.value_size, 8)
    if args.bootstrap:
        run(args.bootstrap, {"client": os.getpid()}, args)
        return
    with tempfile.TemporaryDirectory(prefix="riverlog-bench-") as data_dir:
        local = LocalCluster(
            data_dir, storage_nodes=args.storage_nodes, metadata_nodes=1, gateways=1
        )
        with local as cluster:
            run(cluster.gateway_address, announce(cluster), args)


if __name__ == "__main__":
    main()
