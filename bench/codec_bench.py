"""Record-batch codec throughput: encode and decode N records per compression type.

Encodes records of random bytes (a ~10-byte key and a 100-byte value by default) with
`BatchBuilder` at batch.size 16384, as a producer does, then decodes them the way a consumer
does: the batches joined into fetch responses of ~1 MiB (max.partition.fetch.bytes), each read
with `iter_batches_records` (CRC checked, every Record created and consumed) and, separately,
with `decode_columns`. Prints records/s and MB/s of record payload (key + value bytes) per line.

    .venv/bin/python bench/codec_bench.py [--records N] [--repeat R] [--codecs none,lz4]

Values come from a pool of 4096 distinct random values (a batch holds ~140 records, so no batch
repeats one): random bytes do not compress, so compressed figures are the codecs' worst case.
"""

from __future__ import annotations

import argparse
import gc
import os
import time

from riverlog.common.records import (
    BatchBuilder,
    CompressionType,
    decode_columns,
    iter_batches_records,
)

POOL = 4096
FETCH_BYTES = 1 << 20


def encode(
    codec: CompressionType, timestamps: list[int], keys: list[bytes], values: list[bytes], size: int
) -> tuple[list[bytes], float]:
    batches: list[bytes] = []
    start = time.perf_counter()
    builder = BatchBuilder(codec, batch_size=size)
    append = builder.append
    for ts, key, value in zip(timestamps, keys, values, strict=True):
        if not append(ts, key, value):
            batches.append(builder.build())
            builder = BatchBuilder(codec, batch_size=size)
            append = builder.append
            append(ts, key, value)
    batches.append(builder.build())
    return batches, time.perf_counter() - start


def fetches(batches: list[bytes]) -> list[bytes]:
    """Whole batches grouped into ~FETCH_BYTES responses."""
    out: list[bytes] = []
    group: list[bytes] = []
    size = 0
    for batch in batches:
        if size + len(batch) > FETCH_BYTES and group:
            out.append(b"".join(group))
            group, size = [], 0
        group.append(batch)
        size += len(batch)
    out.append(b"".join(group))
    return out


def decode_records(responses: list[bytes]) -> tuple[int, float]:
    """A consumer's loop: every Record created and visited from Python."""
    count = 0
    start = time.perf_counter()
    for response in responses:
        for _record in iter_batches_records(response):
            count += 1
    return count, time.perf_counter() - start


def decode_cols(responses: list[bytes]) -> tuple[int, float]:
    count = 0
    start = time.perf_counter()
    for response in responses:
        count += len(decode_columns(response))
    return count, time.perf_counter() - start


def line(what: str, codec: CompressionType, n: int, seconds: float, payload: int) -> str:
    return (
        f"{what:<16} {codec.config_name:<7} {n / seconds:>12,.0f} records/s"
        f" {payload / seconds / 1e6:>9.1f} MB/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--key-size", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=16384)
    parser.add_argument(
        "--repeat", type=int, default=1, help="best of N runs per line (a shared machine is noisy)"
    )
    parser.add_argument(
        "--codecs", default=",".join(c.config_name for c in CompressionType), help="e.g. none,lz4"
    )
    args = parser.parse_args()
    n = args.records
    pool_values = [os.urandom(args.value_size) for _ in range(POOL)]
    pool_keys = [os.urandom(args.key_size) for _ in range(POOL)]
    keys = [pool_keys[i % POOL] for i in range(n)]
    values = [pool_values[(i * 7) % POOL] for i in range(n)]
    base = 1_700_000_000_000
    timestamps = [base + i // 50 for i in range(n)]  # ~50 records per millisecond
    payload = n * (args.key_size + args.value_size)
    print(
        f"{n:,} records, key {args.key_size} B, value {args.value_size} B (random), "
        f"batch.size {args.batch_size}, fetches of {FETCH_BYTES >> 10} KiB"
    )
    for name in args.codecs.split(","):
        codec = CompressionType.from_name(name)
        seconds = float("inf")
        for _ in range(args.repeat):
            gc.collect()
            batches, elapsed = encode(codec, timestamps, keys, values, args.batch_size)
            seconds = min(seconds, elapsed)
        wire = sum(len(b) for b in batches)
        print(line("encode", codec, n, seconds, payload) + f"   {len(batches)} batches, {wire:,} B")
        responses = fetches(batches)
        del batches
        for what, decode in (("decode records", decode_records), ("decode columns", decode_cols)):
            seconds = float("inf")
            for _ in range(args.repeat):
                gc.collect()
                count, elapsed = decode(responses)
                assert count == n, (count, n)
                seconds = min(seconds, elapsed)
            print(line(what, codec, n, seconds, payload))


if __name__ == "__main__":
    main()
