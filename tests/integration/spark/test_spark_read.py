"""Batch reads through the `riverlog` format against the session cluster: a whole topic equals
what was produced, offset ranges are honoured exactly, minPartitions splits without
duplicates or gaps, a tiered topic reads from below its local log start, and under
kafka.isolation.level=read_committed a read drops an aborted transaction's records and stops at
the last stable offset (an open transaction's first offset), where read_uncommitted reads all."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest
from spark_helpers import produce, rows_as_dicts

from riverlog.client import AdminClient, Producer, TopicPartition

pytestmark = [pytest.mark.spark, pytest.mark.integration]

T0 = 1_700_000_000_000
EARLIEST_LOCAL = -4  # ListOffsets by Kafka's convention: the first offset on the leader's disk


def _records(n: int) -> list[dict]:
    return [
        {
            "value": b"value-%d" % i,
            "key": None if i % 5 == 0 else b"key-%d" % (i % 7),
            "partition": i % 3,
            "headers": [("h", b"%d" % i), ("n", b"x")] if i % 4 == 0 else [],
            "timestamp_ms": T0 + i,
        }
        for i in range(n)
    ]


def _reader(spark, bootstrap: str):
    return spark.read.format("riverlog").option("riverlog.bootstrap", bootstrap)


def test_batch_read_equals_what_was_produced(spark, gateway_address, new_topic):
    topic = new_topic(partitions=3)
    sent = produce(gateway_address, topic, _records(90))
    df = _reader(spark, gateway_address).option("subscribe", topic).load()
    assert [f.name for f in df.schema.fields] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    rows = rows_as_dicts(df)
    expected = sorted(sent, key=lambda r: (r["partition"], r["offset"]))
    assert len(rows) == len(expected) == 90
    for row, want in zip(rows, expected, strict=True):
        assert (row["topic"], row["partition"], row["offset"]) == (
            topic, want["partition"], want["offset"],
        )  # fmt: skip
        assert row["key"] == want["key"]
        assert row["value"] == want["value"]
        assert row["headers"] == want["headers"]
        assert row["timestampType"] == 0
        stamp = dt.datetime.fromtimestamp(want["timestamp_ms"] / 1000, dt.UTC)
        assert row["timestamp"].replace(tzinfo=dt.UTC) == stamp
    assert {p: sum(1 for r in rows if r["partition"] == p) for p in range(3)} == {
        0: 30, 1: 30, 2: 30,
    }  # fmt: skip


def test_starting_and_ending_offsets_select_exactly_that_range(spark, gateway_address, new_topic):
    topic = new_topic(partitions=3)
    produce(gateway_address, topic, _records(60))  # 20 records per partition
    df = (
        _reader(spark, gateway_address)
        .option("subscribe", topic)
        .option("startingOffsets", json.dumps({topic: {"0": 5, "1": -2, "2": 19}}))
        .option("endingOffsets", json.dumps({topic: {"0": 8, "1": 3, "2": -1}}))
        .load()
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, 5), (0, 6), (0, 7), (1, 0), (1, 1), (1, 2), (2, 19)]


def test_min_partitions_splits_ranges_without_duplicates_or_gaps(spark, gateway_address, new_topic):
    topic = new_topic(partitions=2)
    produce(gateway_address, topic, [{"value": b"v%d" % i, "partition": i % 2} for i in range(400)])
    df = (
        _reader(spark, gateway_address)
        .option("assign", json.dumps({topic: [0, 1]}))
        .option("minPartitions", "7")
        .load()
    )
    assert df.rdd.getNumPartitions() >= 7
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == sorted((p, o) for p in range(2) for o in range(200))


def test_subscribe_pattern_and_register_call(spark, gateway_address, new_topic):
    import riverlog.spark

    riverlog.spark.register(spark)  # harmless where the source was auto-discovered
    topic = new_topic(partitions=1)
    produce(gateway_address, topic, [{"value": b"a"}, {"value": b"b"}])
    df = _reader(spark, gateway_address).option("subscribePattern", topic + ".*").load()
    assert sorted(bytes(r.value) for r in df.collect()) == [b"a", b"b"]


def test_starting_and_ending_timestamps_select_that_time_range(spark, gateway_address, new_topic):
    topic = new_topic(partitions=3)
    sent = produce(gateway_address, topic, _records(30))  # timestamps T0 + i
    df = (
        _reader(spark, gateway_address)
        .option("subscribe", topic)
        .option("startingTimestamp", str(T0 + 20))
        .option("endingTimestamp", str(T0 + 27))
        .load()
    )
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    want = sorted(
        (r["partition"], r["offset"]) for r in sent if T0 + 20 <= r["timestamp_ms"] < T0 + 27
    )
    assert got == want


@pytest.mark.timeout(400)
def test_a_tiered_topic_reads_from_offset_zero_below_the_local_log_start(
    spark, gateway_address, new_topic
):
    """Tiered storage (the session cluster's nodes tier to a directory): once the leader has
    copied the closed segments and deleted them locally, a batch read from the earliest offset
    gets every record — the remote ones first — with its offset and bytes."""
    topic = new_topic(
        configs={
            "remote.storage.enable": "true",
            "segment.bytes": "8192",
            "local.retention.bytes": "0",
        }
    )
    now = int(time.time() * 1000)  # retention.ms (7 days) would take older records at once
    records = [
        {"value": b"%d|" % i + bytes([i % 251]) * 300, "key": b"k%d" % i, "timestamp_ms": now + i}
        for i in range(120)
    ]  # ~40 KB: about five segments
    sent = []  # ten records per request: a request's payload must fit in a segment
    for i in range(0, len(records), 10):
        sent += produce(gateway_address, topic, records[i : i + 10])
    tp = TopicPartition(topic, 0)
    deadline = time.monotonic() + 60
    with AdminClient({"bootstrap.servers": gateway_address}) as admin:
        while True:
            found = admin.list_offsets({tp: EARLIEST_LOCAL})[tp]
            earliest = admin.list_offsets({tp: -2})[tp]
            if found is not None and found.offset >= 60:
                break
            assert time.monotonic() < deadline, f"local segments still there: {found}"
            time.sleep(0.2)
    assert earliest is not None and earliest.offset == 0  # still readable, remotely
    df = _reader(spark, gateway_address).option("subscribe", topic).load()
    rows = rows_as_dicts(df)
    assert [r["offset"] for r in rows] == [r["offset"] for r in sent] == list(range(120))
    for row, want in zip(rows, sent, strict=True):
        assert (row["key"], row["value"]) == (want["key"], want["value"])
        stamp = dt.datetime.fromtimestamp(want["timestamp_ms"] / 1000, dt.UTC)
        assert row["timestamp"].replace(tzinfo=dt.UTC) == stamp


def _sent(future) -> int:
    return future.result(timeout=30).offset


def _wait_until_complete(transactional_id: str, bootstrap: str) -> None:
    """An abort is answered once decided; its markers are written after."""
    deadline = time.monotonic() + 60
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        while True:
            found = admin.describe_transactions([transactional_id])[transactional_id]
            if getattr(found, "state", None) == "CompleteAbort":
                return
            assert time.monotonic() < deadline, f"{transactional_id} still {found}"
            time.sleep(0.1)


def test_read_committed_drops_aborted_records_and_stops_at_the_lso(
    spark, gateway_address, new_topic
):
    """Offsets: 0-1 plain, 2-3 an aborted transaction (its marker at 4), 5-6 plain, 7-8 a
    transaction left open, 9 plain. read_committed reads 0-1 and 5-6: nothing aborted, nothing
    at or past the open transaction's first offset (the LSO), not even the committed plain
    record after it; read_uncommitted reads every data record, aborted and open ones too."""
    topic = new_topic(partitions=1)
    conf = {"bootstrap.servers": gateway_address, "linger.ms": 0}

    def plain(*values: bytes) -> list[int]:
        return [
            r["offset"] for r in produce(gateway_address, topic, [{"value": v} for v in values])
        ]

    expected_committed = plain(b"p0", b"p1")
    with Producer({**conf, "transactional.id": "spark-rc-aborted-" + topic}) as aborted:
        aborted.init_transactions(timeout=60)
        aborted.begin_transaction()
        aborted_offsets = [_sent(aborted.send(topic, v)) for v in (b"a0", b"a1")]
        aborted.abort_transaction(timeout=60)
    _wait_until_complete("spark-rc-aborted-" + topic, gateway_address)  # its marker is at 4
    expected_committed += plain(b"c0", b"c1")
    with Producer({**conf, "transactional.id": "spark-rc-open-" + topic}) as open_txn:
        open_txn.init_transactions(timeout=60)
        open_txn.begin_transaction()
        open_offsets = [_sent(open_txn.send(topic, v)) for v in (b"o0", b"o1")]
        after = plain(b"d0")
        try:
            committed = rows_as_dicts(
                _reader(spark, gateway_address)
                .option("subscribe", topic)
                .option("kafka.isolation.level", "read_committed")
                .load()
            )
            uncommitted = rows_as_dicts(
                _reader(spark, gateway_address)
                .option("subscribe", topic)
                .option("kafka.isolation.level", "read_uncommitted")
                .load()
            )
        finally:
            open_txn.abort_transaction(timeout=60)
    assert aborted_offsets == [2, 3] and open_offsets == [7, 8] and after == [9]
    assert [(r["offset"], r["value"]) for r in committed] == [
        (0, b"p0"), (1, b"p1"), (5, b"c0"), (6, b"c1"),
    ]  # fmt: skip
    assert [r["offset"] for r in committed] == expected_committed
    assert [(r["offset"], r["value"]) for r in uncommitted] == [
        (0, b"p0"), (1, b"p1"), (2, b"a0"), (3, b"a1"), (5, b"c0"), (6, b"c1"),
        (7, b"o0"), (8, b"o1"), (9, b"d0"),
    ]  # fmt: skip
