"""The example pipeline: web page views per page per minute, from a Riverlog topic, through a
Structured Streaming job with an event-time watermark, into another Riverlog topic and Parquet.

    python -m riverlog.spark.examples.pageviews [--bootstrap HOST:PORT] [--master local[2]]
        [--events 20000] [--out $RIVERLOG_HOME/pageviews]   # `make pipeline` runs this

1. creates the topics `page-views` (3 partitions) and `page-view-counts` (1), if missing;
2. produces `--events` JSON page views (`{"user", "page", "ts"}`, ts in ms, keyed by user, record
   timestamp = event time) spread over ten minutes of event time that ends now, a few seconds
   out of order, then a handful that arrive ten minutes late, which the watermark drops;
3. runs the streaming job with trigger(availableNow=True): read `page-views` → parse the JSON →
   watermark of 1 minute on the event time → count per (1-minute window, page) → in append
   mode, each window once the watermark has passed it, written exactly once to the topic
   `page-view-counts` (key page, JSON value) by Riverlog's transactional sink, and to Parquet
   by Spark's file sink (two queries, one checkpoint each);
4. prints the busiest pages per minute from the Parquet output and the topic's record count.

The checkpoint lives under `--out`, so running the script again resumes the same query: it reads
only the new events; windows still open at the end of the last run (the final minute or two,
which the watermark has not passed yet) are emitted once later events move the watermark on,
and new events older than the watermark are dropped as late, as the watermark promises.
`--master spark://host:7077` (or yarn, k8s://...) runs the job on a Spark cluster instead.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from riverlog.cli.connection import default_data_dir, resolve_bootstrap
from riverlog.cli.console import CliError
from riverlog.client import AdminClient, NewTopic, Producer

EVENTS_TOPIC = "page-views"
COUNTS_TOPIC = "page-view-counts"
PAGES = ["/", "/pricing", "/docs", "/docs/quickstart", "/blog", "/blog/riverlog-1-0", "/signup"]
WEIGHTS = [30, 8, 15, 10, 12, 6, 4]
EVENT_SCHEMA = "user STRING, page STRING, ts BIGINT"  # ts: event time, ms since the epoch


def ensure_topics(bootstrap: str) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        existing = set(admin.list_topics())
        wanted = [NewTopic(EVENTS_TOPIC, 3, 1), NewTopic(COUNTS_TOPIC, 1, 1)]
        missing = [t for t in wanted if t.name not in existing]
        if missing:
            admin.create_topics(missing)
            time.sleep(1.0)  # leaders elected before the first send


def generate(bootstrap: str, events: int, seed: int) -> int:
    """Produce page views over the ten minutes before now, then a few that arrive ten minutes
    late (one in 2,000), which the watermark drops; returns how many were sent."""
    rng = random.Random(seed)
    now_ms = int(time.time() * 1000)
    start_ms = now_ms - 10 * 60_000
    step = (now_ms - start_ms) / max(events, 1)
    late = [start_ms + rng.randrange(60_000) for _ in range(events // 2_000)]
    on_time = [int(start_ms + i * step) - rng.randrange(5_000) for i in range(events - len(late))]
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"}) as producer:
        for ts in on_time + late:  # on time but a few seconds out of order, then the late ones
            user = f"user-{rng.randrange(500)}"
            page = rng.choices(PAGES, WEIGHTS)[0]
            value = json.dumps({"user": user, "page": page, "ts": ts})
            producer.send(EVENTS_TOPIC, value.encode(), user.encode(), timestamp_ms=ts)
        producer.flush()
    return len(on_time) + len(late)


def build_jobs(spark: Any, bootstrap: str, out: Path, max_per_trigger: int) -> list[Any]:
    """The streaming queries, started: Riverlog → windowed counts → Riverlog, and → Parquet."""
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("riverlog")
        .option("riverlog.bootstrap", bootstrap)
        .option("subscribe", EVENTS_TOPIC)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(max_per_trigger))
        .load()
        .select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
        .select(F.col("e.page").alias("page"), F.expr("timestamp_millis(e.ts)").alias("event_time"))
    )
    counts = (
        events.withWatermark("event_time", "1 minute")
        .groupBy(F.window("event_time", "1 minute"), "page")
        .count()
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            F.col("count").alias("views"),
        )
    )
    # Two queries over the same counts, each exactly once: Spark's file sink (its own commit
    # log), and Riverlog's transactional sink (each micro-batch one set of transactions,
    # committed by the driver; a replayed batch is recognised and not written again).
    to_parquet = (
        counts.writeStream.outputMode("append")
        .format("parquet")
        .option("path", str(out / "counts.parquet"))
        .option("checkpointLocation", str(out / "checkpoint-parquet"))
        .trigger(availableNow=True)
        .start()
    )
    to_topic = (
        counts.select(
            F.col("page").cast("binary").alias("key"),
            F.to_json(F.struct("window_start", "window_end", "page", "views"))
            .cast("binary")
            .alias("value"),
        )
        .writeStream.outputMode("append")
        .format("riverlog")
        .option("riverlog.bootstrap", bootstrap)
        .option("topic", COUNTS_TOPIC)
        .option("riverlog.transactional", "true")
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    return [to_topic, to_parquet]


def report(spark: Any, bootstrap: str, out: Path) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.window import Window

    path = out / "counts.parquet"
    if not path.exists():
        print("no window has closed yet: run again after more events")
        return
    counts = spark.read.parquet(str(path))
    rank = Window.partitionBy("window_start").orderBy(F.desc("views"), "page")
    top = (
        counts.withColumn("rank", F.row_number().over(rank))
        .where("rank <= 3")
        .orderBy("window_start", "rank")
        .collect()
    )
    print("\nbusiest pages per minute (from Parquet):")
    for row in top:
        start = row.window_start.strftime("%H:%M")
        print(f"  {start}  #{row['rank']}  {row.page:<20} {row.views:>6} views")
    total = counts.agg(F.sum("views")).first()[0]
    print(f"\n{counts.count()} (window, page) counts, {total} views, in {path}")
    topic_rows = (
        spark.read.format("riverlog")
        .option("riverlog.bootstrap", bootstrap)
        .option("subscribe", COUNTS_TOPIC)
        .option("kafka.isolation.level", "read_committed")
        .load()
    )
    print(f"{topic_rows.count()} count records in the topic {COUNTS_TOPIC!r}; the latest:")
    for row in topic_rows.orderBy(F.desc("offset")).limit(3).collect():
        print(f"  offset {row.offset}: {bytes(row.value).decode()}")


def _bootstrap(explicit: str | None) -> str:
    try:
        return resolve_bootstrap(explicit)
    except CliError as e:
        sys.exit(f"pageviews: {e}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Page views per page per minute on Riverlog.")
    parser.add_argument("--bootstrap", help="gateway HOST:PORT (default: the local cluster)")
    parser.add_argument("--master", default="local[2]", help="Spark master URL")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument(
        "--out", type=Path, help="Parquet output and checkpoint (default: $RIVERLOG_HOME/pageviews)"
    )
    parser.add_argument("--max-offsets-per-trigger", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    bootstrap = _bootstrap(args.bootstrap)
    out = (args.out or default_data_dir() / "pageviews").resolve()
    out.mkdir(parents=True, exist_ok=True)

    ensure_topics(bootstrap)
    seed = args.seed if args.seed is not None else time.time_ns()
    print(f"producing {generate(bootstrap, args.events, seed)} page views to {EVENTS_TOPIC!r}")

    from riverlog.spark.session import local_session

    spark = local_session("riverlog-pageviews", args.master, work_dir=out / "spark-work")
    try:
        run_job(spark, bootstrap, out, args.max_offsets_per_trigger)
        report(spark, bootstrap, out)
    finally:
        spark.stop()


def run_job(spark: Any, bootstrap: str, out: Path, max_per_trigger: int) -> dict[str, int]:
    """Run the streaming job until it has read what is there (availableNow); print and return
    how many events it read, in how many micro-batches, and how many the watermark dropped."""
    started = time.monotonic()
    queries = build_jobs(spark, bootstrap, out, max_per_trigger)
    for query in queries:
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"the streaming query failed: {query.exception()}")
    progress = queries[0].recentProgress
    batches = [p for p in progress if p["numInputRows"] > 0]
    rows = sum(p["numInputRows"] for p in batches)
    dropped = sum(
        op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p["stateOperators"]
    )
    watermark = progress[-1]["eventTime"].get("watermark", "-") if progress else "-"
    print(
        f"streaming job read {rows} events in {len(batches)} micro-batches "
        f"({time.monotonic() - started:.1f} s); {dropped} arrived behind the watermark and were "
        f"dropped; watermark now {watermark}"
    )
    return {"events": rows, "batches": len(batches), "dropped": dropped}


if __name__ == "__main__":
    main()
