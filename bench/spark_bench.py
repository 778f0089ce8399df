"""Throughput of the `riverlog` PySpark data source on local[2]. Prints figures; not a test.

Starts a cluster with the launcher (etcd, one metadata instance, three storage nodes, one
gateway, all on this machine; or uses `--bootstrap`), creates a topic of `--partitions`
partitions (default 2, one per local core) with replication factor 1, then measures, after a
warm-up (the first Python data source query of a session costs 7-20 s of set-up):

1. batch write: `spark.range(N)` as 100-byte values written with `df.write.format("riverlog")`
   (acks=1, linger.ms=5), rows/s from the action's start to its end;
2. batch read into a count: `spark.read.format("riverlog")...load().count()`;
3. batch read into Parquet: the same DataFrame written with `.write.parquet(...)` (all columns).

The session runs with the JVM's full JIT (not the tests' fast-start flags), and the warm-up
moves a fifth of N rows each way first so the figures are steady-state ones.

Each read runs `--runs` times and the best is printed (the machine is shared and noisy).

    .venv/bin/python bench/spark_bench.py [--records 1000000] [--partitions 2] [--runs 2]
        [--bootstrap host:port]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from riverlog.client import AdminClient, NewTopic
from riverlog.cluster import LocalCluster
from riverlog.spark.session import local_session

VALUE_SIZE = 100


def timed(action: Callable[[], Any]) -> float:
    return timed_result(action)[1]


def timed_result(action: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = action()
    return result, time.perf_counter() - start


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    time.sleep(1.0)  # leaders elected


def write(spark: Any, bootstrap: str, topic: str, records: int, partitions: int) -> float:
    df = spark.range(0, records, 1, partitions).selectExpr(
        f"CAST(lpad(CAST(id AS STRING), {VALUE_SIZE}, 'x') AS BINARY) AS value"
    )
    return timed(
        lambda: (
            df.write.format("riverlog")
            .option("riverlog.bootstrap", bootstrap)
            .option("topic", topic)
            .option("kafka.acks", "1")
            .mode("append")
            .save()
        )
    )


def source(spark: Any, bootstrap: str, topic: str) -> Any:
    return (
        spark.read.format("riverlog")
        .option("riverlog.bootstrap", bootstrap)
        .option("subscribe", topic)
        .load()
    )


def run(bootstrap: str, args: argparse.Namespace, work: Path) -> None:
    # Full JIT (fast_start=False): C1 only starts sooner but runs Spark 2x slower here.
    spark = local_session("riverlog-bench", "local[2]", work_dir=work / "spark", fast_start=False)
    n = args.records
    warm = max(n // 5, 1000)  # enough rows for the JIT to compile the hot paths
    create_topic(bootstrap, "warm-up", args.partitions)
    write(spark, bootstrap, "warm-up", warm, args.partitions)
    assert source(spark, bootstrap, "warm-up").count() == warm
    source(spark, bootstrap, "warm-up").write.parquet(str(work / "warm-up.parquet"))

    topic = "spark-bench"
    create_topic(bootstrap, topic, args.partitions)
    elapsed = write(spark, bootstrap, topic, n, args.partitions)
    print(f"batch write {n:,} x {VALUE_SIZE} B: {elapsed:.1f} s, {n / elapsed:,.0f} rows/s")

    best = float("inf")
    for _ in range(args.runs):
        counted, elapsed = timed_result(source(spark, bootstrap, topic).count)
        assert counted == n, counted
        best = min(best, elapsed)
    print(f"batch read into count: {best:.1f} s, {n / best:,.0f} rows/s")

    best = float("inf")
    for run_index in range(args.runs):
        out = work / f"parquet-{run_index}"
        df = source(spark, bootstrap, topic)
        best = min(best, timed(lambda: df.write.parquet(str(out))))  # noqa: B023
        shutil.rmtree(out, ignore_errors=True)
    print(f"batch read into Parquet: {best:.1f} s, {n / best:,.0f} rows/s")
    spark.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--bootstrap", help="a running cluster's gateway (host:port)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="riverlog-spark-bench-") as tmp:
        work = Path(tmp)
        if args.bootstrap:
            run(args.bootstrap, args, work)
            return
        with LocalCluster(work / "cluster", storage_nodes=3, metadata_nodes=1, gateways=1) as c:
            print(f"cluster up: gateway {c.gateway_address}")
            run(c.gateway_address, args, work)


if __name__ == "__main__":
    main()
