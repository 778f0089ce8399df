"""Helpers for the log cleaner tests: keyed batches, a compacted log, and one cleaning pass
run synchronously (what `LogCleaner.clean_once` does, without the worker thread)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from storage_log_testkit import TP, config, read_bytes

from riverlog.common.clock import ManualClock
from riverlog.common.records import BatchBuilder, CompressionType, Record, iter_batches_records
from riverlog.services.storage.log import LogConfig, PartitionLog
from riverlog.services.storage.log.cleaner import (
    Cleaner,
    CleanerManager,
    CleanerStats,
    OffsetMap,
)

KV = tuple[bytes | None, bytes | None]


def compact_config(**overrides: Any) -> LogConfig:
    base: dict[str, Any] = {
        "cleanup_policy": "compact",
        "segment_bytes": 1024,
        "min_cleanable_dirty_ratio": "0.01",
    }
    base.update(overrides)
    return config(**base)


def keyed_batch(
    records: Sequence[KV],
    ts: int,
    compression: CompressionType = CompressionType.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    builder = BatchBuilder(
        compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )
    for i, (key, value) in enumerate(records):
        builder.append(ts + i, key, value)
    return builder.build()


def open_compacted(path: Path, clock: ManualClock, cfg: LogConfig | None = None) -> PartitionLog:
    """A compacted log the cleaner may clean: no producer state attached, so nothing in it is
    taken for an open transaction (the cleaner waits for the producer state otherwise)."""
    log = PartitionLog.open(path / str(TP), TP, cfg or compact_config(), clock)
    log.producer_state_loaded = True
    return log


def append(log: PartitionLog, records: Sequence[KV], clock: ManualClock, **kw: Any) -> None:
    """Append one batch as leader; the high watermark follows the log end."""
    log.append_as_leader(keyed_batch(records, clock.time_ms(), **kw), 0)
    log.high_watermark = log.log_end_offset


def records(log: PartitionLog, offset: int | None = None) -> list[Record]:
    start = log.log_start_offset if offset is None else offset
    return list(iter_batches_records(read_bytes(log, start)))


def latest_by_key(recs: Sequence[Record]) -> dict[bytes | None, tuple[int, bytes | None]]:
    out: dict[bytes | None, tuple[int, bytes | None]] = {}
    for r in recs:
        out[r.key] = (r.offset, r.value)
    return out


def clean(
    log: PartitionLog,
    clock: ManualClock,
    manager: CleanerManager | None = None,
    buffer_bytes: int = 1 << 20,
    force: bool = False,
) -> CleanerStats | None:
    """One pass over `log` if it is due (or has anything cleanable, with `force`)."""
    manager = manager if manager is not None else CleanerManager([])
    now = clock.time_ms()
    candidate = manager.measure(log, now)
    if candidate is None:
        return None
    due = candidate.forced or (
        candidate.dirty_bytes > 0 and candidate.dirty_ratio >= log.config.min_cleanable_dirty_ratio
    )
    if not (due or force):
        return None
    stats = Cleaner(OffsetMap(buffer_bytes), threading.Event()).clean(
        manager.to_clean(candidate, now)
    )
    for group in stats.groups:
        assert log.replace_segments([s.segment for s in group.old], [s.size for s in group.old])
    manager.done_cleaning(log.tp, None, stats.end_offset, stats.next_delete_horizon_ms, [])
    return stats
