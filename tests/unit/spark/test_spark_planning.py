"""Range planning of the `riverlog` source without Spark running: JSON offsets, data-loss
checks, minPartitions splits (no gap, no overlap), maxOffsetsPerTrigger shares, and the Arrow
batches a task yields."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from riverlog.common.records.reader import RecordColumns
from riverlog.common.types import TopicPartition as TP
from riverlog.spark.fetch import ARROW_SCHEMA, to_arrow
from riverlog.spark.offsets import (
    DataLossError,
    OffsetRange,
    check_ranges,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)


def test_offsets_json_round_trip_with_string_partition_keys():
    offsets = {TP("b", 1): 7, TP("a", 0): 3, TP("a", 10): 0}
    data = offsets_to_json(offsets)
    assert data == {"a": {"0": 3, "10": 0}, "b": {"1": 7}}
    assert offsets_from_json(data) == offsets


def test_check_ranges_reports_or_skips_deleted_records():
    start, end, earliest = (
        {TP("t", 0): 2, TP("t", 1): 0},
        {TP("t", 0): 9, TP("t", 1): 0},
        {
            TP("t", 0): 5,
            TP("t", 1): 0,
        },
    )
    with pytest.raises(DataLossError, match="failOnDataLoss"):
        check_ranges(start, end, earliest, fail_on_data_loss=True)
    assert check_ranges(start, end, earliest, fail_on_data_loss=False) == [
        OffsetRange("t", 0, 5, 9)
    ]  # the empty partition 1 needs no task


@pytest.mark.parametrize("min_partitions", [None, 1, 3, 7, 50])
def test_split_ranges_covers_each_offset_once(min_partitions):
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 10, 13), OffsetRange("u", 0, 5, 6)]
    split = split_ranges(ranges, min_partitions)
    assert len(split) >= min(min_partitions or 0, 104)
    covered = sorted((r.topic, r.partition, o) for r in split for o in range(r.start, r.end))
    assert covered == sorted(
        (r.topic, r.partition, o) for r in ranges for o in range(r.start, r.end)
    )


def test_rate_limit_shares_in_proportion_and_always_progresses():
    start = {TP("t", 0): 0, TP("t", 1): 0, TP("t", 2): 50}
    latest = {TP("t", 0): 100, TP("t", 1): 300, TP("t", 2): 51}
    limited = rate_limit(start, latest, 100)
    assert limited[TP("t", 0)] - 0 == 24 and limited[TP("t", 1)] == 74
    assert limited[TP("t", 2)] == 51  # under one record's share: still moves
    assert rate_limit(start, latest, 10_000) == latest


def test_to_arrow_has_the_kafka_schema():
    cols = RecordColumns(
        offsets=[4, 5],
        timestamps=[1_700_000_000_123, 1_700_000_000_456],
        timestamp_types=[0, 1],
        keys=[None, b"k"],
        values=[b"v1", None],
        headers=[[], [("h", b"x"), ("n", None)]],
    )
    batch = to_arrow("topic", 2, cols)
    assert batch.schema == ARROW_SCHEMA
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [4, 5]
    assert rows[0]["topic"] == "topic" and rows[1]["partition"] == 2
    assert rows[1]["headers"] == [{"key": "h", "value": b"x"}, {"key": "n", "value": None}]
    assert rows[0]["timestamp"].timestamp() == 1_700_000_000.123
    no_headers = to_arrow("t", 0, RecordColumns([1], [0], [0], [None], [b"v"], [[]]))
    assert no_headers.to_pylist()[0]["headers"] == []
