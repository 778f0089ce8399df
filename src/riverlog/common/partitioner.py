"""Kafka's default key partitioning: `toPositive(murmur2(key)) % numPartitions`.

Any client that partitions keyed records must agree with Kafka's Java producer, or the same key
lands on different partitions depending on who produced it; so this is Kafka's `Utils.murmur2`
(MurmurHash2, 32-bit, seed 0x9747b28c, little-endian 4-byte blocks) bit for bit, returning the
same signed int32 as Java, and `toPositive` masks the sign bit rather than taking abs(). Records
without a key are not partitioned here (Kafka's producer spreads them with its sticky
partitioner, a client-side policy).

The 4-byte blocks are read with one `struct.unpack_from` call, so the per-block Python work is a
few multiplications; the gateway calls this once per plain record, the slow path anyway.
"""

from __future__ import annotations

import struct
from typing import Final

_SEED: Final = 0x9747B28C
_M: Final = 0x5BD1E995
_MASK: Final = 0xFFFFFFFF
_CACHED_BLOCKS: Final = 256  # keys up to 1 KiB reuse a compiled Struct
_BLOCKS: dict[int, struct.Struct] = {}


def murmur2(data: bytes | bytearray) -> int:
    """Kafka's `Utils.murmur2(data)`: a signed 32-bit int, as Java returns it."""
    length = len(data)
    m = _M
    h = (_SEED ^ length) & _MASK
    n = length >> 2
    if n:
        blocks = _BLOCKS.get(n)
        if blocks is None:
            blocks = struct.Struct(f"<{n}I")
            if n <= _CACHED_BLOCKS:
                _BLOCKS[n] = blocks
        for k in blocks.unpack_from(data):
            k = (k * m) & _MASK
            k ^= k >> 24
            h = ((h * m) & _MASK) ^ ((k * m) & _MASK)
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * m) & _MASK
    h ^= h >> 13
    h = (h * m) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Kafka's `Utils.toPositive`: the sign bit cleared (not abs(): -1 becomes 2**31 - 1)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner picks for a record with this key."""
    if num_partitions <= 0:
        raise ValueError(f"a topic has at least one partition, not {num_partitions}")
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
