"""The exactly-once streaming sink (`riverlog.transactional`, spark/txn_writer.py) on the
session cluster: a stream copies a topic exactly once; and when the driver dies after the
sink committed a micro-batch but before Spark recorded it (simulated by removing the batch from
the checkpoint's commit log, which is what such a death leaves), the restarted query replays the
batch and the sink writes nothing twice. The same replay through the at-least-once sink does
duplicate, which shows the replay really happened."""

from __future__ import annotations

from pathlib import Path

import pytest
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


def _values(spark, bootstrap: str, topic: str) -> list[bytes]:
    rows = (
        spark.read.format("riverlog")
        .option("riverlog.bootstrap", bootstrap)
        .option("subscribe", topic)
        .option("kafka.isolation.level", "read_committed")
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
