"""The gateway's per-topic traffic hooks: acknowledged appends and delivered offsets counted
per partition, failed partitions not at all, the plain-record API by its encoded sizes, and
nothing counted when the process serves no `/metrics`."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from riverlog.common.errors import ErrorCode
from riverlog.common.metrics import endpoint
from riverlog.common.metrics.settings import PrometheusSettings
from riverlog.common.records import BatchBuilder
from riverlog.common.types import TopicPartition
from riverlog.services.gateway import traffic
from riverlog.services.gateway.fetch import FetchPart, FetchPartResult
from riverlog.services.gateway.produce import ProducePart, ProducePartResult

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def batch(base: int, count: int) -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(0, None, b"v%d" % i)
    return struct.pack(">q", base) + builder.build()[8:]


class Message:
    def __init__(self, size: int) -> None:
        self.size = size

    def ByteSize(self) -> int:
        return self.size


@pytest.fixture
def counting() -> Iterator[None]:
    endpoint.configure(PrometheusSettings(port=0))
    traffic.register()
    try:
        yield
    finally:
        endpoint.unregister("gateway-traffic")
        endpoint.configure(None)
        traffic._traffic = None


def totals() -> dict[str, dict[tuple[str, ...], float]]:
    assert traffic._traffic is not None
    return {
        m.name: {tuple(s.labels.values()): s.value for s in m.samples}
        for m in traffic._traffic.collect()
    }


def test_produce_and_fetch_per_partition(counting: None) -> None:
    data = batch(0, 3)
    traffic.produced(
        [ProducePart(T0, data), ProducePart(T1, data)],
        [
            ProducePartResult(T0, base_offset=10, last_offset=12),
            ProducePartResult(T1, error_code=ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ],
    )
    fetched = batch(5, 4)
    traffic.fetched([FetchPart(T0, 6)], [FetchPartResult(T0, records=fetched)])
    found = totals()
    assert found["riverlog_topic_bytes_in"] == {("t",): len(data)}
    assert found["riverlog_topic_records_in"] == {("t",): 3}
    assert found["riverlog_topic_bytes_out"] == {("t",): len(fetched)}
    assert found["riverlog_topic_records_out"] == {("t",): 3}  # offsets 6, 7, 8


def test_plain_record_api(counting: None) -> None:
    traffic.produced_plain("p", Message(120), 2)  # two of the records appended
    traffic.produced_plain("p", Message(50), 0)  # none: no bytes counted either
    traffic.fetched_plain("p", Message(80), 4, 6)
    traffic.fetched_plain("p", Message(10), 6, 6)  # nothing new: nothing counted
    found = totals()
    assert found["riverlog_topic_records_in"] == {("p",): 2}
    assert found["riverlog_topic_bytes_in"] == {("p",): 120}
    assert found["riverlog_topic_records_out"] == {("p",): 2}
    assert found["riverlog_topic_bytes_out"] == {("p",): 80}


def test_nothing_counted_without_metrics() -> None:
    endpoint.configure(None)
    traffic.register()
    assert traffic._traffic is None
    traffic.produced([ProducePart(T0, b"x")], [ProducePartResult(T0, base_offset=0)])
