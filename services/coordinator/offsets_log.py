"""The coordinator partitions' log as a shard sees it: append a batch of coordinator records
with the owner's producer identity (for TxnOffsetCommit followed by a transactional batch of
the client's producer), write a transaction's marker, read a partition back when loading it.
`peers/storage.py` implements it over the storage nodes' gRPC API; domain code depends only on
this protocol, so it stays free of transport code and tests can pass an in-memory log."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol

from .records import CoordinatorRecord, LogRecord, TxnProducer

__all__ = ["LogRecord", "OffsetsLog", "TxnProducer"]


class OffsetsLog(Protocol):
    async def append(
        self,
        partition: int,
        records: Sequence[CoordinatorRecord],
        producer_epoch: int,
        base_sequence: int,
        timestamp_ms: int,
        timeout_ms: int,
        producer: TxnProducer | None = None,
        txn_records: Sequence[CoordinatorRecord] = (),
    ) -> int:
        """Append one batch of the owner (its epoch and sequence) with acks=all; the offset of
        the last record written. With `producer`, `txn_records` follow in the same payload as
        that producer's transactional batch: appended together or not at all, so the owner's
        batch is the fence for both (decision 0031). RiverlogError with the storage node's
        code when refused (INVALID_PRODUCER_EPOCH for a zombie owner or a fenced producer)."""
        ...

    async def write_marker(
        self,
        partition: int,
        producer_id: int,
        producer_epoch: int,
        committed: bool,
        coordinator_epoch: int,
        timeout_ms: int,
    ) -> None:
        """A transaction's COMMIT or ABORT marker in the partition (WriteTxnMarkers at its
        leader, acks=all); the same marker again is a duplicate, answered as written."""
        ...

    def read(self, partition: int) -> AsyncIterator[LogRecord]:
        """Every record of the partition from its log start up to the high watermark seen
        when the read began, markers included."""
        ...
