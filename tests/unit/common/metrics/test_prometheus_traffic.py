"""Per-topic traffic totals and `offsets_delivered`, on batches built by the SDK's builder."""

from __future__ import annotations

import struct

from prometheus_client.core import Metric

from riverlog.common.metrics.traffic import TopicTraffic, offsets_delivered
from riverlog.common.records import BatchBuilder


def batch(base: int, count: int) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(0, None, b"v%d" % i)
    return struct.pack(">q", base) + builder.build()[8:]  # the base offset the leader assigns


def test_offsets_delivered_counts_from_the_fetch_offset() -> None:
    data = batch(10, 5) + batch(15, 3)
    assert offsets_delivered(data, 10) == 8
    assert offsets_delivered(data, 12) == 6  # the first batch starts before the fetch offset


def test_a_partial_batch_at_the_end_is_not_counted() -> None:
    data = batch(0, 4) + batch(4, 4)[:30]
    assert offsets_delivered(data, 0) == 4
    assert offsets_delivered(b"", 7) == 0
    assert offsets_delivered(batch(0, 4)[:-1], 0) == 0


def samples(metric: Metric) -> dict[tuple[str, ...], float]:
    return {tuple(s.labels.values()): s.value for s in metric.samples}


def test_topic_traffic_totals() -> None:
    traffic = TopicTraffic()
    traffic.produced("a", 100, 4)
    traffic.produced("a", 50, 1)
    traffic.fetched("b", 70, 3)
    families = {m.name: m for m in traffic.collect()}
    assert samples(families["riverlog_topic_bytes_in"]) == {("a",): 150}
    assert samples(families["riverlog_topic_records_in"]) == {("a",): 5}
    assert samples(families["riverlog_topic_bytes_out"]) == {("b",): 70}
    assert samples(families["riverlog_topic_records_out"]) == {("b",): 3}
    assert {m.name for m in traffic.describe()} == set(families)
