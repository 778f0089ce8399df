"""Bytes and records in and out per topic (Kafka's BrokerTopicMetrics), counted once per
partition of a produce or fetch request, never per record: the hot path adds one dict lookup
and two integer additions per partition. The totals are plain integers read by the scrape
thread (reading an int is atomic under the GIL; `dict.copy()` runs without releasing it)."""

from __future__ import annotations

import struct
from collections.abc import Iterable

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from .endpoint import family

_LENGTH = struct.Struct(">qi")  # baseOffset, batchLength: the first 12 bytes of a batch
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta, at byte 23 of a batch
_LAST_DELTA_AT = 23
_HEADER = 61  # a v2 batch header's size


def offsets_delivered(data: bytes | memoryview, fetch_offset: int) -> int:
    """How many offsets a fetch answer `data` (whole v2 batches) moves a consumer at
    `fetch_offset` forward: one step per batch, reading two header fields, no record and no
    CRC. Batches start at or before `fetch_offset`; a partial batch at the end is not
    counted."""
    end = len(data)
    pos = 0
    last = -1
    while pos + _HEADER <= end:
        base, length = _LENGTH.unpack_from(data, pos)
        after = pos + 12 + length
        if length < _HEADER - 12 or after > end:
            break
        last = base + _LAST_DELTA.unpack_from(data, pos + _LAST_DELTA_AT)[0]
        pos = after
    return max(last + 1 - fetch_offset, 0)


_NAMES = (
    "riverlog_topic_bytes_in",
    "riverlog_topic_records_in",
    "riverlog_topic_bytes_out",
    "riverlog_topic_records_out",
)


class TopicTraffic(Collector):
    """Per-topic totals; `produced()`/`fetched()` from the event loop, `collect()` from the
    scrape thread."""

    def __init__(self) -> None:
        self._in: dict[str, list[int]] = {}
        self._out: dict[str, list[int]] = {}

    def produced(self, topic: str, size: int, records: int) -> None:
        totals = self._in.get(topic)
        if totals is None:
            totals = self._in[topic] = [0, 0]
        totals[0] += size
        totals[1] += records

    def fetched(self, topic: str, size: int, records: int) -> None:
        totals = self._out.get(topic)
        if totals is None:
            totals = self._out[topic] = [0, 0]
        totals[0] += size
        totals[1] += records

    def describe(self) -> Iterable[Metric]:
        return [family(n) for n in _NAMES]

    def collect(self) -> Iterable[Metric]:
        bytes_in, records_in, bytes_out, records_out = (family(n) for n in _NAMES)
        for topic, (size, records) in sorted(self._in.copy().items()):
            bytes_in.add_metric([topic], size)
            records_in.add_metric([topic], records)
        for topic, (size, records) in sorted(self._out.copy().items()):
            bytes_out.add_metric([topic], size)
            records_out.add_metric([topic], records)
        return [bytes_in, records_in, bytes_out, records_out]
