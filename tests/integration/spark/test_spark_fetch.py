"""The worker-side read path on its own (no SparkSession): a range read twice gives the same
rows (what a retried task relies on), ranges cut inside produce batches lose and repeat
nothing, and records deleted after planning are data loss at read time, or skipped."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
from spark_helpers import produce

from riverlog.client import AdminClient, ConsumerConfig
from riverlog.common.types import TopicPartition
from riverlog.spark import DataLossError, OffsetRange
from riverlog.spark.fetch import ARROW_SCHEMA, RangeReader

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _read(address: str, r: OffsetRange, fail: bool = True, **conf: str) -> pa.Table:
    config = ConsumerConfig.from_kafka({"bootstrap.servers": address, **conf})
    reader = RangeReader(config, fail)
    try:
        return pa.Table.from_batches(list(reader.read(r)), schema=ARROW_SCHEMA)
    finally:
        reader.close()


def test_a_range_reads_the_same_rows_every_time(gateway_address, new_topic):
    topic = new_topic()
    produce(gateway_address, topic, [{"value": b"v%d" % i} for i in range(500)])
    # small fetches: many answers, each cut where max.partition.fetch.bytes falls
    r = OffsetRange(topic, 0, 37, 411)
    first = _read(gateway_address, r, **{"max.partition.fetch.bytes": "2048"})
    again = _read(gateway_address, r)
    assert first.column("offset").to_pylist() == list(range(37, 411))
    assert first.column("value").to_pylist() == [b"v%d" % i for i in range(37, 411)]
    assert again.equals(first)


def test_pieces_of_a_partition_add_up_to_it(gateway_address, new_topic):
    topic = new_topic()
    produce(gateway_address, topic, [{"value": b"v%d" % i} for i in range(300)])
    bounds = [0, 1, 99, 100, 101, 250, 300]
    offsets = []
    for lo, hi in itertools.pairwise(bounds):
        offsets += (
            _read(gateway_address, OffsetRange(topic, 0, lo, hi)).column("offset").to_pylist()
        )
    assert offsets == list(range(300))


def test_records_deleted_after_planning(gateway_address, new_topic):
    topic = new_topic()
    produce(gateway_address, topic, [{"value": b"v%d" % i} for i in range(50)])
    planned = OffsetRange(topic, 0, 0, 50)
    with AdminClient({"bootstrap.servers": gateway_address}) as admin:
        admin.delete_records({TopicPartition(topic, 0): 20})
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        _read(gateway_address, planned)
    skipped = _read(gateway_address, planned, fail=False)
    assert skipped.column("offset").to_pylist() == list(range(20, 50))
