"""Micro-benchmark of the storage log layer: append and read throughput of 1,000,000 records of
100 bytes in ~16 KiB batches (what a producer with batch.size=16384 sends).

    .venv/bin/python bench/storage_log_bench.py [--records N] [--dir PATH]

Batches are built before timing (that is the producer's work). Prints MB/s for: appends as
leader (validate + assign offsets + write + index), reads of 1 MiB fetches cut as slices only
(what the zero-copy server does before os.sendfile), the same with the bytes copied out
(pread), and random single-batch lookups per second.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from riverlog.common.clock import SYSTEM_CLOCK
from riverlog.common.records import BatchBuilder
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import LogConfig, PartitionLog


def build_batches(records: int, value_size: int = 100, batch_size: int = 16384) -> list[bytes]:
    batches: list[bytes] = []
    value = b"x" * value_size
    now = SYSTEM_CLOCK.time_ms()
    builder = BatchBuilder(batch_size=batch_size)
    for i in range(records):
        if not builder.append(now, None, value):
            batches.append(builder.build())
            builder = BatchBuilder(batch_size=batch_size)
            builder.append(now, None, value)
        if i % 1000 == 0:
            now += 1
    batches.append(builder.build())
    return batches


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    batches = build_batches(args.records)
    total = sum(len(b) for b in batches)
    print(f"{args.records} records in {len(batches)} batches, {total / 1e6:.1f} MB")
    root = Path(tempfile.mkdtemp(dir=args.dir))
    try:
        cfg = LogConfig.from_overrides({"segment.bytes": str(32 * 1024 * 1024)})
        log = PartitionLog.open(root / "bench-0", TopicPartition("bench", 0), cfg, SYSTEM_CLOCK)
        start = time.perf_counter()
        for batch in batches:
            log.append_as_leader(batch, 0)
        elapsed = time.perf_counter() - start
        log.high_watermark = log.log_end_offset
        print(
            f"append: {total / elapsed / 1e6:8.1f} MB/s  {args.records / elapsed:10.0f} rec/s  "
            f"{len(batches) / elapsed:8.0f} batches/s  ({log.segment_count} segments)"
        )
        # Batch i starts at offset starts[i]: a fetch returning k bytes from batch i covers the
        # batches whose sizes add up to k, so the next fetch offset is known without decoding.
        sizes = [len(b) for b in batches]
        starts = [0]
        for batch in batches:
            starts.append(starts[-1] + int.from_bytes(batch[57:61], "big"))
        for copy in (False, True):
            start = time.perf_counter()
            index, read_total, fetches = 0, 0, 0
            while index < len(batches):
                with log.read(starts[index], 1 << 20, max_offset=log.high_watermark) as fetched:
                    got = len(fetched.to_bytes()) if copy else fetched.size
                read_total += got
                fetches += 1
                while got > 0:
                    got -= sizes[index]
                    index += 1
            elapsed = time.perf_counter() - start
            assert read_total == total
            what = "read+pread" if copy else "read slices"
            print(
                f"{what:11}: {read_total / elapsed / 1e6:8.1f} MB/s  "
                f"{fetches / elapsed:8.0f} fetches/s of 1 MiB"
            )
        rng = random.Random(1)
        n = 20_000
        start = time.perf_counter()
        for _ in range(n):
            with log.read(rng.randrange(log.log_end_offset), 1):
                pass
        elapsed = time.perf_counter() - start
        print(f"random lookups: {n / elapsed:8.0f} reads/s ({elapsed / n * 1e6:.1f} us each)")
        log.close()
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
