"""The exactly-once streaming sink (`riverlog.transactional`, spark/txn_writer.py) on the
session cluster: a stream copies a topic exactly once; and when the driver dies after the
sink committed a micro-batch but before Spark recorded it (simulated by removing the batch from
the checkpoint's commit log, which is what such a death leaves), the restarted query replays the
batch and the sink writes nothing twice. The same replay through the at-least-once sink does
duplicate, which shows the replay really happened. And a real task failure: a task attempt that
wrote rows into its transaction dies, Spark retries the task, and the batch holds each row
once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.functions import udf
from spark_helpers import produce

from riverlog.spark.options import RiverlogOptionError

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(400)]

RECORDS = 90


def _copy(spark, bootstrap: str, source: str, dest: str, checkpoint: Path, exactly_once: bool):
    query = (
        spark.readStream.format("riverlog")
        .option("riverlog.bootstrap", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "40")
        .load()
        .selectExpr("key", "value", "partition")
        .writeStream.format("riverlog")
        .option("riverlog.bootstrap", bootstrap)
        .option("topic", dest)
        .option("riverlog.transactional", "true" if exactly_once else "false")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(240)
    assert not query.isActive
    assert query.exception() is None
    return [p["batchId"] for p in query.recentProgress if p["numInputRows"] > 0]


def _values(spark, bootstrap: str, topic: str, isolation: str = "read_committed") -> list[bytes]:
    rows = (
        spark.read.format("riverlog")
        .option("riverlog.bootstrap", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", isolation)
        .load()
        .select("value")
        .collect()
    )
    return sorted(bytes(r.value) for r in rows)


def _forget_last_batch(checkpoint: Path) -> int:
    """Remove the newest micro-batch from the commit log, as a driver that died between the
    sink's commit and Spark's record of it leaves the checkpoint; its id."""
    commits = checkpoint / "commits"
    last = max(int(f.name) for f in commits.iterdir() if f.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    return last


def test_a_replayed_micro_batch_is_written_once(spark, gateway_address, new_topic, tmp_path):
    source = new_topic(partitions=3)
    exact, at_least_once = new_topic(partitions=3), new_topic(partitions=3)
    sent = produce(
        gateway_address,
        source,
        [{"value": b"v%03d" % i, "partition": i % 3} for i in range(RECORDS)],
    )
    expected = sorted(r["value"] for r in sent)

    for dest, exactly_once in ((exact, True), (at_least_once, False)):
        checkpoint = tmp_path / f"checkpoint-{dest}"
        batches = _copy(spark, gateway_address, source, dest, checkpoint, exactly_once)
        assert len(batches) >= 3  # maxOffsetsPerTrigger split it
        assert _values(spark, gateway_address, dest) == expected
        replayed = _forget_last_batch(checkpoint)
        again = _copy(spark, gateway_address, source, dest, checkpoint, exactly_once)
        assert again == [replayed]  # Spark ran that batch again, with the same input

    assert _values(spark, gateway_address, exact) == expected  # each record once
    duplicated = _values(spark, gateway_address, at_least_once)
    assert len(duplicated) > RECORDS and set(duplicated) == set(expected)


def test_the_transactional_sink_is_for_streams_only(spark, gateway_address, new_topic):
    topic = new_topic()
    df = spark.createDataFrame([(b"x",)], "value binary")
    with pytest.raises(Exception, match=r"riverlog\.transactional is for streaming writes"):
        (
            df.write.format("riverlog")
            .option("riverlog.bootstrap", gateway_address)
            .option("topic", topic)
            .option("riverlog.transactional", "true")
            .mode("append")
            .save()
        )


def test_transactional_options_are_checked() -> None:
    from riverlog.spark.options import parse_write_options

    base = {"riverlog.bootstrap": "127.0.0.1:1", "topic": "t"}
    assert parse_write_options({**base, "riverlog.transactional": "TRUE"}).transactional
    with pytest.raises(RiverlogOptionError, match="true or false"):
        parse_write_options({**base, "riverlog.transactional": "yes"})
    with pytest.raises(RiverlogOptionError, match=r"do not set transactional\.id"):
        parse_write_options(
            {**base, "riverlog.transactional": "true", "riverlog.producer.transactional.id": "x"}
        )


def _fail_first_attempt(bootstrap: str, dest: str, record: Path) -> Callable[[bytes, int], bytes]:
    """A UDF passing `value` through, except in the first attempt of Spark partition 0: there,
    from its second row on, it asks the destination partition's high watermark, and once the
    sink has written some rows into its transaction it notes the rows it has passed in
    `record` and raises, so Spark retries the task. It cannot wait for the sink: the task's
    thread feeds the sink's Python worker only between the UDF's rows, through a 64 KB buffer
    (`spark.buffer.size`), so the sink gets rows only when that fills: with 4 KB records, 16
    rows reached the sink after 32 had passed (measured), of the 90 of a partition."""
    passed: list[bytes] = []

    def run(value: bytes, partition: int) -> bytes:
        from pyspark import TaskContext

        from riverlog.client import AdminClient
        from riverlog.common.types import TopicPartition

        context = TaskContext.get()
        if context is None or context.attemptNumber() > 0 or context.partitionId() != 0:
            return value
        if passed:
            tp = TopicPartition(dest, partition)
            with AdminClient({"bootstrap.servers": bootstrap}) as admin:
                latest = admin.list_offsets({tp: -1})[tp]
            if latest is not None and latest.offset > 0:
                record.write_bytes(b"\n".join(passed))
                raise RuntimeError("injected failure of the task's first attempt")
        passed.append(bytes(value))
        return value

    return run


def test_a_failed_task_attempt_is_aborted_and_its_retry_written_once(
    spark: Any, gateway_address: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """A REAL task failure (decision 0036, step 1): the first attempt of one task writes rows
    into its transaction and dies; Spark retries the task (the session's master allows two
    attempts), the retry's init_transactions aborts the dead attempt's transaction, and the
    batch commits. read_committed sees every record once; read_uncommitted also sees the dead
    attempt's rows, which proves it wrote them."""
    source, dest = new_topic(partitions=3), new_topic(partitions=3)
    sent = produce(
        gateway_address,
        source,
        [
            {"value": (b"f%03d" % i).ljust(4096, b"."), "partition": i % 3}
            for i in range(3 * RECORDS)
        ],
    )
    expected = sorted(r["value"] for r in sent)
    failed_rows = tmp_path / "failed-attempt-rows"
    small_batches = {  # so the UDF returns, and the sink gets, rows a few at a time
        "spark.sql.execution.arrow.maxRecordsPerBatch": "4",
        "spark.sql.execution.python.udf.maxRecordsPerBatch": "4",
    }
    saved = {k: spark.conf.get(k, None) for k in small_batches}
    for k, v in small_batches.items():
        spark.conf.set(k, v)
    try:
        df = (
            spark.readStream.format("riverlog")
            .option("riverlog.bootstrap", gateway_address)
            .option("subscribe", source)
            .option("startingOffsets", "earliest")
            .load()
        )
        fail_once = udf(
            _fail_first_attempt(gateway_address, dest, failed_rows), "binary", useArrow=False
        )
        query = (
            df.select("key", fail_once("value", "partition").alias("value"), "partition")
            .writeStream.format("riverlog")
            .option("riverlog.bootstrap", gateway_address)
            .option("topic", dest)
            .option("riverlog.transactional", "true")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(240)
    finally:
        for k, v in saved.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)
    assert not query.isActive
    assert query.exception() is None  # the retry succeeded and the batch committed

    assert failed_rows.exists(), "the first attempt never saw the sink write: nothing failed"
    dead = failed_rows.read_bytes().split(b"\n")  # the first attempt ran, wrote and died
    # nothing lost, nothing twice; and the dead attempt's transaction is not left open (its
    # records would hold the last stable offset back, hiding the rest of the partition)
    assert _values(spark, gateway_address, dest) == expected
    uncommitted = _values(spark, gateway_address, dest, isolation="read_uncommitted")
    aborted = Counter(uncommitted) - Counter(expected)  # the dead attempt's rows: written...
    assert aborted and set(aborted) <= set(dead) and max(aborted.values()) == 1
    assert Counter(uncommitted) - aborted == Counter(expected)  # ...and aborted, not committed
