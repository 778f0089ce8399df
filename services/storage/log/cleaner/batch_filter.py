"""What the cleaner keeps of one stored batch (Kafka's LogCleaner.shouldRetainRecord and the
batch retention of MemoryRecords.filterTo), as a pure function of the batch, the offset map,
the producers' last batches and the time.

A record stays when it has a key and no later record of that key is in the offset map (the
map covers the dirty section; a record past what the map saw is never superseded). A
tombstone (null value) that stays is kept until its batch's delete horizon: the first
cleaning that keeps it stamps the batch with horizon = now + `delete.retention.ms`
(KIP-534); a later cleaning after that time removes it. Records without a key cannot be
compacted and are dropped (the leader refuses them on compacted topics). A batch left with no
record is dropped, unless it is its producer's last batch in the cleaned range, which stays as
an empty header so the producer's last sequence and epoch survive a rebuild of the producer
state from the log.

Transactions (`txn_metadata.py` decides, `discard`): a data batch of an aborted transaction
goes like a batch left with no record. A marker is kept whole, unless it may go: then the
first cleaning stamps it with horizon = now + `delete.retention.ms` (as a tombstone) and a
cleaning after that removes it; a producer's last batch stays whole even then (an empty
marker would not say what it ends).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from riverlog.common.records.header import CONTROL_MASK, BatchHeader, parse_header
from riverlog.common.records.rewrite import (
    decode_raw,
    delete_horizon_ms,
    empty_batch,
    rebuild_batch,
)

from .offset_map import OffsetMap


@dataclass(frozen=True, slots=True)
class Filtered:
    """The bytes to write for one batch (b"" to drop it), how many records it had and kept,
    and, when it keeps tombstones, its delete horizon."""

    data: bytes
    records_read: int
    records_kept: int
    tombstone_horizon_ms: int | None


def filter_batch(
    batch: bytes,
    offset_map: OffsetMap,
    producer_last_offsets: Mapping[int, int],
    now_ms: int,
    delete_retention_ms: int,
    discard: bool = False,
) -> Filtered:
    """Apply the module docstring's rules to the one whole `batch`; `discard`: it is data of
    an aborted transaction, or a marker that may go."""
    header = parse_header(batch)
    count = header.records_count
    if header.attributes & CONTROL_MASK:
        if not discard or _is_last_of_producer(header, producer_last_offsets):
            return Filtered(batch, count, count, None)
        horizon = delete_horizon_ms(header)
        if horizon is None:
            horizon = now_ms + delete_retention_ms
            raw = decode_raw(batch)
            return Filtered(
                rebuild_batch(raw, list(range(len(raw))), horizon), count, count, horizon
            )
        if now_ms >= horizon:
            return Filtered(b"", count, 0, None)
        return Filtered(batch, count, count, horizon)
    if discard:
        data = empty_batch(header) if _is_last_of_producer(header, producer_last_offsets) else b""
        return Filtered(data, count, 0, None)
    raw = decode_raw(batch)
    horizon = delete_horizon_ms(header)
    tombstones_expired = horizon is not None and now_ms >= horizon
    get = offset_map.get
    keep: list[int] = []
    kept_tombstone = False
    for i, (key, offset, tombstone) in enumerate(
        zip(raw.keys, raw.offsets, raw.tombstones, strict=True)
    ):
        if key is None or get(key) > offset:
            continue
        if tombstone:
            if tombstones_expired:
                continue
            kept_tombstone = True
        keep.append(i)
    if not keep:
        data = empty_batch(header) if _is_last_of_producer(header, producer_last_offsets) else b""
        return Filtered(data, count, 0, None)
    if kept_tombstone and horizon is None:
        horizon = now_ms + delete_retention_ms
        return Filtered(rebuild_batch(raw, keep, horizon), count, len(keep), horizon)
    tombstone_horizon = horizon if kept_tombstone else None
    if len(keep) == count:
        return Filtered(batch, count, count, tombstone_horizon)
    return Filtered(rebuild_batch(raw, keep), count, len(keep), tombstone_horizon)


def _is_last_of_producer(header: BatchHeader, producer_last_offsets: Mapping[int, int]) -> bool:
    if header.producer_id < 0:
        return False
    return producer_last_offsets.get(header.producer_id) == header.last_offset


def keyed_offsets(batch: bytes, start_offset: int) -> list[tuple[bytes, int]]:
    """(key, offset) of the keyed records at or after `start_offset` in one whole batch, in
    offset order, for building the offset map; none for a control batch."""
    header = parse_header(batch)
    if header.attributes & CONTROL_MASK:
        return []
    raw = decode_raw(batch)
    return [
        (key, offset)
        for key, offset in zip(raw.keys, raw.offsets, strict=True)
        if key is not None and offset >= start_offset
    ]
