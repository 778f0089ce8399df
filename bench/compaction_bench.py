"""Benchmark of log compaction: one cleaning pass over a ~200 MB compacted log of many updates
to a few thousand keys.

    .venv/bin/python bench/compaction_bench.py [--mb 200] [--keys 5000] [--value-size 1000]
                                               [--compression none|lz4|zstd] [--dir PATH]

The log is written first (untimed) as leader appends of ~16 KiB producer batches into 32 MB
segments; then one pass of the log cleaner runs as the storage node runs it (the pass in a
worker thread, the install on the event loop). Prints the bytes and records cleaned per
second, the size before and after, and checks that every key's latest value survived.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from riverlog.common.clock import SYSTEM_CLOCK
from riverlog.common.records import BatchBuilder, CompressionType, iter_batches_records
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import LogConfig, LogManager
from riverlog.services.storage.log.cleaner import CleanerConfig, LogCleaner

TP = TopicPartition("bench-compacted", 0)
MB = 1_000_000


def write_log(
    logs: LogManager, mb: int, keys: int, value_size: int, codec: CompressionType
) -> tuple[int, dict[bytes, bytes]]:
    log = logs.get_or_create(TP)
    latest: dict[bytes, bytes] = {}
    records = 0
    now = SYSTEM_CLOCK.time_ms()
    builder = BatchBuilder(codec, batch_size=16384)
    while log.size_bytes < mb * MB:
        key = b"key-%08d" % (records * 7919 % keys)
        value = b"%010d" % records + b"v" * (value_size - 10)
        if not builder.append(now, key, value):
            log.append_as_leader(builder.build(), 0)
            builder = BatchBuilder(codec, batch_size=16384)
            builder.append(now, key, value)
        latest[key] = value
        records += 1
    log.append_as_leader(builder.build(), 0)
    log.roll()  # every record below the active segment: all cleanable
    log.high_watermark = log.log_end_offset
    return records, latest


async def clean(logs: LogManager) -> float:
    cleaner = LogCleaner(logs, SYSTEM_CLOCK, CleanerConfig())
    started = time.perf_counter()
    assert await cleaner.clean_once()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--keys", type=int, default=5000)
    parser.add_argument("--value-size", type=int, default=1000)
    parser.add_argument("--compression", default="none", choices=["none", "lz4", "zstd"])
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    codec = {"none": CompressionType.NONE, "lz4": CompressionType.LZ4}.get(
        args.compression, CompressionType.ZSTD
    )
    root = Path(tempfile.mkdtemp(prefix="compaction-bench-", dir=args.dir))
    config = LogConfig.from_overrides(
        {"cleanup.policy": "compact", "segment.bytes": str(32 * 1024 * 1024)}
    )
    try:
        logs = LogManager([root], SYSTEM_CLOCK, config)
        records, latest = write_log(logs, args.mb, args.keys, args.value_size, codec)
        log = logs.get(TP)
        assert log is not None
        before, segments = log.size_bytes, log.segment_count
        print(
            f"{records} records ({args.value_size} B values, {args.keys} keys, "
            f"{args.compression}) in {before / MB:.1f} MB, {segments} segments"
        )
        elapsed = asyncio.run(clean(logs))
        after = log.size_bytes
        with log.read(0, 1 << 31) as fetched:
            survivors = {r.key: r.value for r in iter_batches_records(fetched.to_bytes())}
        assert survivors == latest, "a key lost its latest value"
        print(
            f"cleaned in {elapsed:.2f} s: {before / MB / elapsed:.1f} MB/s, "
            f"{records / elapsed / 1000:.0f} k records/s; {before / MB:.1f} MB -> "
            f"{after / MB:.2f} MB, {segments} -> {log.segment_count} segments, "
            f"{len(survivors)} records left"
        )
        logs.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
