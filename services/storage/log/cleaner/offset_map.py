"""The cleaner's key -> latest offset map (Kafka's SkimpyOffsetMap), bounded in memory.

Kafka keeps 16-byte MD5 digests of keys in a fixed array sized by
`log.cleaner.dedupe.buffer.size`; a plain dict of key bytes does the same job here with less
code. The bound is kept in the same unit: each entry is charged `ENTRY_BYTES` (Kafka's 16-byte
hash plus 8-byte offset), and the map counts as full at Kafka's load factor of 0.9, so a given
buffer size dedupes about as many keys as it would on a Kafka broker.
"""

from __future__ import annotations

from typing import Final

ENTRY_BYTES: Final = 24
LOAD_FACTOR: Final = 0.9


class OffsetMap:
    """Keys to the latest offset seen for them, plus the latest offset put overall. Used by one
    cleaning pass at a time, in the cleaner's thread."""

    def __init__(self, buffer_bytes: int) -> None:
        if buffer_bytes < ENTRY_BYTES:
            raise ValueError(f"a dedupe buffer of {buffer_bytes} bytes holds no entry")
        self.slots = buffer_bytes // ENTRY_BYTES
        self.max_entries = max(int(self.slots * LOAD_FACTOR), 1)
        self._map: dict[bytes, int] = {}
        self.latest_offset = -1

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` as the latest for `key` (offsets are put in increasing order)."""
        self._map[key] = offset
        if offset > self.latest_offset:
            self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of `key`, or -1 when it was not seen."""
        return self._map.get(key, -1)

    def update_latest_offset(self, offset: int) -> None:
        """Move the latest offset past batches that put no key (empty or keyless batches)."""
        self.latest_offset = max(self.latest_offset, offset)

    @property
    def size(self) -> int:
        return len(self._map)

    @property
    def is_full(self) -> bool:
        return len(self._map) >= self.max_entries

    @property
    def utilization(self) -> float:
        return len(self._map) / self.slots

    def clear(self) -> None:
        self._map.clear()
        self.latest_offset = -1

    def __contains__(self, key: bytes) -> bool:
        return key in self._map
