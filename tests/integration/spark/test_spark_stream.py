"""Streaming reads through the `riverlog` format: trigger(availableNow=True) twice on one
checkpoint delivers every record exactly once to a Parquet sink (the memory sink cannot restart
from a checkpoint), maxOffsetsPerTrigger splits the backlog into several micro-batches under
availableNow, and partitions added between runs are read from their beginning."""

from __future__ import annotations

import time

import pytest
from spark_helpers import produce

from riverlog.client import AdminClient
from riverlog.common.types import TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _run_available_now(spark, bootstrap, topic, checkpoint, out, **options) -> list:
    stream = (
        spark.readStream.format("riverlog")
        .option("riverlog.bootstrap", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        stream = stream.option(key, value)
    query = (
        stream.load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    assert query.exception() is None
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def _read_sink(spark, out) -> list[tuple[int, int, str]]:
    rows = spark.read.parquet(str(out)).collect()
    return sorted((r.partition, r.offset, r.value) for r in rows)


def test_available_now_twice_on_one_checkpoint_sees_every_record_once(
    spark, gateway_address, new_topic, tmp_path
):
    topic = new_topic(partitions=3)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    first = produce(gateway_address, topic, [{"value": b"a%d" % i} for i in range(30)])
    _run_available_now(spark, gateway_address, topic, checkpoint, out)
    assert len(_read_sink(spark, out)) == 30

    second = produce(gateway_address, topic, [{"value": b"b%d" % i} for i in range(25)])
    _run_available_now(spark, gateway_address, topic, checkpoint, out)
    got = _read_sink(spark, out)
    expected = sorted((r["partition"], r["offset"], r["value"].decode()) for r in first + second)
    assert got == expected  # every record once: no gap, no duplicate across the restart

    progress = _run_available_now(spark, gateway_address, topic, checkpoint, out)
    assert progress == []  # nothing new: nothing read again
    assert _read_sink(spark, out) == expected


def test_max_offsets_per_trigger_under_available_now_and_new_partitions(
    spark, gateway_address, new_topic, tmp_path
):
    topic = new_topic(partitions=2)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    sent = produce(
        gateway_address, topic, [{"value": b"v%d" % i, "partition": i % 2} for i in range(100)]
    )
    progress = _run_available_now(
        spark, gateway_address, topic, checkpoint, out, maxOffsetsPerTrigger="30"
    )
    assert [p["numInputRows"] for p in progress] == [30, 30, 30, 10]

    with AdminClient({"bootstrap.servers": gateway_address}) as admin:
        admin.create_partitions({topic: 3})
    sent += produce(
        gateway_address, topic, [{"value": b"n%d" % i, "partition": 2} for i in range(5)]
    )
    _run_available_now(spark, gateway_address, topic, checkpoint, out, maxOffsetsPerTrigger="30")
    expected = sorted((r["partition"], r["offset"], r["value"].decode()) for r in sent)
    assert _read_sink(spark, out) == expected


def test_processing_time_trigger_reads_records_as_they_arrive(
    spark, gateway_address, new_topic, tmp_path
):
    topic = new_topic(partitions=2)
    seen: list[tuple[int, int, bytes]] = []

    def collect(batch, _batch_id):  # runs in this (the driver's) Python process
        seen.extend((r.partition, r.offset, bytes(r.value)) for r in batch.collect())

    query = (
        spark.readStream.format("riverlog")
        .option("riverlog.bootstrap", gateway_address)
        .option("subscribe", topic)
        .option("startingOffsets", "latest")
        .load()
        .select("partition", "offset", "value")
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    sent = []
    try:
        for round_ in range(2):
            deadline = time.monotonic() + 60
            while not query.lastProgress and time.monotonic() < deadline:
                time.sleep(0.2)  # the first batch has fixed "latest" before we send
            records = [{"value": b"r%d-%d" % (round_, i)} for i in range(20)]
            sent += produce(gateway_address, topic, records)
            while len(seen) < len(sent) and time.monotonic() < deadline:
                time.sleep(0.2)
    finally:
        query.stop()
    assert sorted(seen) == sorted((r["partition"], r["offset"], r["value"]) for r in sent)


def test_records_deleted_before_a_stream_read_them(spark, gateway_address, new_topic, tmp_path):
    topic = new_topic(partitions=1)
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    produce(gateway_address, topic, [{"value": b"a%d" % i} for i in range(10)])
    _run_available_now(spark, gateway_address, topic, checkpoint, out)
    produce(gateway_address, topic, [{"value": b"b%d" % i} for i in range(10)])
    with AdminClient({"bootstrap.servers": gateway_address}) as admin:
        admin.delete_records({TopicPartition(topic, 0): 15})  # 10..14 never read

    with pytest.raises(Exception, match="failOnDataLoss"):
        _run_available_now(spark, gateway_address, topic, checkpoint, out)
    _run_available_now(spark, gateway_address, topic, checkpoint, out, failOnDataLoss="false")
    assert [offset for _, offset, _ in _read_sink(spark, out)] == [*range(10), *range(15, 20)]
