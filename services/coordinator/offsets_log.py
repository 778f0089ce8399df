"""The `__consumer_offsets` log as a shard sees it: append a batch of coordinator records with
the owner's producer identity, read a partition back when loading it. `peers/storage.py`
implements it over the storage nodes' gRPC API; domain code depends only on this protocol, so
it stays free of transport code and tests can pass an in-memory log."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from riverlog.common.records import Record

from .records import CoordinatorRecord


class OffsetsLog(Protocol):
    async def append(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        producer_epoch: int,
        base_sequence: int,
        timestamp_ms: int,
        timeout_ms: int,
    ) -> int:
        """Append one batch with acks=all; the offset of its last record. RiverlogError with
        the storage node's code when refused (INVALID_PRODUCER_EPOCH for a zombie owner)."""
        ...

    def read(self, partition: int) -> AsyncIterator[Record]:
        """Every record of the partition from its log start up to the high watermark seen
        when the read began."""
        ...
