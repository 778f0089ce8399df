"""Bytes and records in and out per topic through this gateway (Kafka's BrokerTopicMetrics;
decision 0033). The gateway is where every client's produce and fetch passes, and only
clients' (replication and the coordinators' own writes go from node to node), so it counts
exactly what Kafka's BytesIn/BytesOut count. One call per request from the servicer, a few
integer additions per partition, and nothing at all when the process serves no `/metrics`.

Records in are the offsets of acknowledged appends (`last_offset - base_offset + 1`; acks=0
answers carry no offsets and add bytes only); records out are the offsets a fetch moves its
consumer forward (`offsets_delivered`). The plain-record API (ProduceRecords, FetchRecords) is
counted too, its bytes being the encoded request or answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from riverlog.common.errors import ErrorCode
from riverlog.common.metrics import endpoint
from riverlog.common.metrics.traffic import TopicTraffic, offsets_delivered

from .fetch import FetchPart, FetchPartResult
from .produce import ProducePart, ProducePartResult

_traffic: TopicTraffic | None = None


def register() -> None:
    """Start counting and serve the totals (no-op when this process serves no `/metrics`)."""
    global _traffic
    if endpoint.enabled():
        _traffic = TopicTraffic()
        endpoint.register("gateway-traffic", _traffic)


def produced(parts: Sequence[ProducePart], results: Sequence[ProducePartResult]) -> None:
    traffic = _traffic
    if traffic is None:
        return
    sizes = {part.tp: len(part.records) for part in parts}
    for result in results:
        if result.error_code != ErrorCode.NONE:
            continue
        records = result.last_offset - result.base_offset + 1 if result.base_offset >= 0 else 0
        traffic.produced(result.tp.topic, sizes.get(result.tp, 0), max(records, 0))


def fetched(parts: Sequence[FetchPart], results: Sequence[FetchPartResult]) -> None:
    traffic = _traffic
    if traffic is None:
        return
    offsets = {part.tp: part.fetch_offset for part in parts}
    for result in results:
        data = result.records
        if data:
            start = offsets.get(result.tp, 0)
            traffic.fetched(result.tp.topic, len(data), offsets_delivered(data, start))


class Encoded(Protocol):
    """A protobuf message (only its size is read, and only when counting)."""

    def ByteSize(self) -> int: ...


def produced_plain(topic: str, request: Encoded, ok: int) -> None:
    """ProduceRecords (the plain-record API) that appended `ok` records; its bytes are the
    encoded request's."""
    traffic = _traffic
    if traffic is not None:
        traffic.produced(topic, request.ByteSize() if ok else 0, ok)


def fetched_plain(topic: str, response: Encoded, offset: int, next_offset: int) -> None:
    """FetchRecords; its bytes are the encoded answer's."""
    traffic = _traffic
    if traffic is not None and next_offset > offset:
        traffic.fetched(topic, response.ByteSize(), next_offset - offset)
