"""Writes through the `riverlog` format: a batch write read back equals what was written
(keys, values, headers, explicit partitions, a topic column), a streaming write from another
topic, and a clear error before any task runs when a column is missing or mistyped."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructField,
    StructType,
)
from spark_helpers import produce, rows_as_dicts

pytestmark = [pytest.mark.spark, pytest.mark.integration]

HEADERS = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
SCHEMA = StructType(
    [
        StructField("key", StringType()),
        StructField("value", BinaryType()),
        StructField("partition", IntegerType()),
        StructField("headers", HEADERS),
    ]
)


def _read(spark, bootstrap, topic):
    return rows_as_dicts(
        spark.read.format("riverlog")
        .option("riverlog.bootstrap", bootstrap)
        .option("subscribe", topic)
        .load()
    )


def test_batch_write_then_read_back(spark, gateway_address, new_topic):
    topic = new_topic(partitions=3)
    data = [
        (f"k{i}" if i % 3 else None, b"value-%d" % i, i % 3, [("i", b"%d" % i)] if i % 2 else [])
        for i in range(60)
    ]
    df = spark.createDataFrame(data, SCHEMA).repartition(2)
    (
        df.write.format("riverlog")
        .option("riverlog.bootstrap", gateway_address)
        .option("topic", topic)
        .option("riverlog.producer.compression.type", "lz4")
        .option("kafka.acks", "all")
        .mode("append")
        .save()
    )
    rows = _read(spark, gateway_address, topic)
    got = sorted((r["value"], r["key"], r["partition"], r["headers"]) for r in rows)
    want = sorted((v, k.encode() if k else None, p, list(h)) for k, v, p, h in data)
    assert got == want
    for p in range(3):  # offsets dense from 0 in each partition
        assert [r["offset"] for r in rows if r["partition"] == p] == list(range(20))


def test_topic_column_and_string_values(spark, gateway_address, new_topic):
    first, second = new_topic(partitions=1), new_topic(partitions=1)
    df = spark.createDataFrame(
        [(first, "one"), (second, "two"), (first, "three")], "topic string, value string"
    )
    df.write.format("riverlog").option("riverlog.bootstrap", gateway_address).mode("append").save()
    # (rows of different Spark tasks land in any order)
    assert sorted(r["value"] for r in _read(spark, gateway_address, first)) == [b"one", b"three"]
    assert [r["value"] for r in _read(spark, gateway_address, second)] == [b"two"]


def test_streaming_write_copies_a_topic(spark, gateway_address, new_topic, tmp_path):
    source, sink = new_topic(partitions=2), new_topic(partitions=1)
    produce(gateway_address, source, [{"value": b"m%d" % i, "key": b"k"} for i in range(40)])
    query = (
        spark.readStream.format("riverlog")
        .option("riverlog.bootstrap", gateway_address)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .selectExpr("key", "upper(CAST(value AS STRING)) AS value")
        .writeStream.format("riverlog")
        .option("riverlog.bootstrap", gateway_address)
        .option("topic", sink)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
    values = sorted(r["value"] for r in _read(spark, gateway_address, sink))
    assert values == sorted(b"M%d" % i for i in range(40))


@pytest.mark.parametrize(
    ("ddl", "message"),
    [
        ("key string, payload binary", "needs a 'value' column"),
        ("value int", "column 'value' must be binary or string"),
        ("value binary, partition string", "column 'partition' must be integer"),
        ("value binary, headers array<string>", "column 'headers' must be array<struct"),
    ],
)
def test_missing_or_mistyped_columns_fail_clearly(spark, gateway_address, topic_name, ddl, message):
    df = spark.createDataFrame([], ddl)
    with pytest.raises(Exception, match=message):
        df.write.format("riverlog").option("riverlog.bootstrap", gateway_address).option(
            "topic", topic_name
        ).mode("append").save()


def test_no_topic_fails_clearly(spark, gateway_address):
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception, match="no topic to write to"):
        df.write.format("riverlog").option("riverlog.bootstrap", gateway_address).mode(
            "append"
        ).save()
