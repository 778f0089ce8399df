"""The message browser's read: up to `limit` records of one partition from an offset, from
the first record at or after a timestamp, or (neither given) the newest ones, read with a
consumer built from the signed-in user's own config (no group, nothing committed)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from riverlog.client import Consumer, ConsumerRecord, TopicPartition

MAX_LIMIT = 500
READ_TIMEOUT_S = 5.0


@dataclass(frozen=True, slots=True)
class BrowsePage:
    records: list[ConsumerRecord]
    start: int  # the partition's log start offset
    end: int  # its log end offset
    position: int  # where the read began


def start_offset(start: int, end: int, offset: int | None, limit: int) -> int:
    """Where to read from: `offset` clamped to the log, or the newest `limit` records."""
    if offset is None:
        return max(start, end - limit)
    return min(max(offset, start), end)


def read_partition(
    conf: Mapping[str, object],
    tp: TopicPartition,
    *,
    offset: int | None = None,
    timestamp_ms: int | None = None,
    limit: int = 50,
    timeout_s: float = READ_TIMEOUT_S,
) -> BrowsePage:
    """Read as described in the module doc; stops at the log end offset, after `limit`
    records, or at `timeout_s`, whichever is first."""
    limit = min(max(limit, 1), MAX_LIMIT)
    consumer = Consumer(
        {**conf, "auto.offset.reset": "earliest", "enable.auto.commit": False},
        fetch_max_wait_ms=100,
    )
    with consumer:
        consumer.assign([tp])
        start = consumer.beginning_offsets([tp])[tp]
        end = consumer.end_offsets([tp])[tp]
        if timestamp_ms is not None:
            found = consumer.offsets_for_times({tp: timestamp_ms}).get(tp)
            position = end if found is None else found.offset
        else:
            position = start_offset(start, end, offset, limit)
        records: list[ConsumerRecord] = []
        if position < end:
            consumer.seek(tp, position)
            deadline = time.monotonic() + timeout_s
            while len(records) < limit and time.monotonic() < deadline:
                batch = consumer.poll(timeout_ms=200, max_records=limit - len(records))
                records.extend(batch.get(tp, []))
                if consumer.position(tp) >= end:
                    break
        return BrowsePage(records[:limit], start, end, position)
