"""Helpers shared by the log-layer tests: valid batches from the shared codec, a log factory,
and readers that return what a log holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from riverlog.common.clock import ManualClock
from riverlog.common.records import BatchBuilder, CompressionType, iter_batches_records
from riverlog.common.records.header import BatchHeader, iter_batches
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import LogConfig, PartitionLog

TS = 1_700_000_000_000
TP = TopicPartition("orders", 0)


def make_batch(
    count: int = 1,
    ts: int = TS,
    value_size: int = 20,
    step_ms: int = 1,
    compression: CompressionType = CompressionType.NONE,
    tag: int = 0,
) -> bytes:
    """A valid batch of `count` records with timestamps ts, ts+step, ... (offsets from 0)."""
    builder = BatchBuilder(compression)
    for i in range(count):
        value = bytes([65 + (tag + i) % 26]) * value_size
        builder.append(ts + i * step_ms, b"k%05d-%05d" % (tag, i), value)
    return builder.build()


def config(**overrides: Any) -> LogConfig:
    """A LogConfig from keyword overrides spelled with underscores (segment_bytes=...)."""
    return LogConfig.from_overrides({k.replace("_", "."): str(v) for k, v in overrides.items()})


def log_dir(path: Path) -> Path:
    return path / str(TP)


def open_log(
    path: Path, clock: ManualClock, cfg: LogConfig | None = None, **kw: Any
) -> PartitionLog:
    return PartitionLog.open(log_dir(path), TP, cfg or LogConfig(), clock, **kw)


def read_bytes(log: PartitionLog, offset: int, max_bytes: int = 1 << 30, **kw: Any) -> bytes:
    with log.read(offset, max_bytes, **kw) as fetched:
        return fetched.to_bytes()


def split(data: bytes) -> list[bytes]:
    """The stored batches in `data`, each as its own bytes."""
    out: list[bytes] = []
    pos = 0
    for header in iter_batches(data) if data else []:
        out.append(data[pos : pos + header.size])
        pos += header.size
    return out


def headers(data: bytes) -> list[BatchHeader]:
    return iter_batches(data) if data else []


def offsets_in(data: bytes) -> list[int]:
    return [r.offset for r in iter_batches_records(data)]


def all_batches(log: PartitionLog) -> list[bytes]:
    """Every stored batch from the log start to the log end."""
    return split(read_bytes(log, log.log_start_offset))


def fill(
    log: PartitionLog,
    batches: int,
    count: int = 1,
    clock: ManualClock | None = None,
    value_size: int = 20,
    advance_ms: int = 0,
) -> None:
    """Append `batches` batches of `count` records as leader (epoch 0), the clock advancing
    `advance_ms` after each; the high watermark follows the log end (a single replica)."""
    for i in range(batches):
        ts = clock.time_ms() if clock else TS + i
        log.append_as_leader(make_batch(count, ts=ts, value_size=value_size, tag=i), 0)
        log.high_watermark = log.log_end_offset
        if clock and advance_ms:
            clock.advance(advance_ms)


def crash(log: PartitionLog) -> None:
    """Drop the log as a kill -9 would: written bytes stay (they are in the page cache), but
    nothing is flushed, no index is trimmed and no last time-index entry is written. Only the
    process's descriptors and mappings are released."""
    for segment in log.segments:
        for index in (segment.offset_index, segment.time_index):
            if index._mm is not None:
                index._mm.close()
                index._mm = None
        segment.log.close()
