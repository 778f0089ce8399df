"""The read_committed reader's filter: which batches of a fetch belong to aborted transactions
(Kafka's consumer `CompletedFetch`, KIP-98).

A read_committed fetch stops at the last stable offset and carries the aborted transactions
whose data may lie in it, as (producer id, first offset) ordered by first offset. Walking the
batches in offset order, a producer is "aborting" from its first offset until its ABORT marker:
its transactional data batches in that range are dropped, and the marker ends the range. The
filter is fed every batch, control batches included (they end ranges), and is pure: the same
code serves the SDK consumer, the gateway's FetchRecords and the Spark source.
"""

from __future__ import annotations

from collections.abc import Iterable

from .control import ControlRecordType, parse_end_txn_marker
from .header import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader

AbortedTransaction = tuple[int, int]
"""(producer id, first offset) of an aborted transaction, as a fetch answers them."""


class AbortedFilter:
    """Decides batch after batch, in offset order, whether a read_committed reader drops it."""

    __slots__ = ("_aborting", "_pending")

    def __init__(self, aborted: Iterable[AbortedTransaction]) -> None:
        # A stack with the lowest first offset on top.
        self._pending = sorted(aborted, key=lambda a: a[1], reverse=True)
        self._aborting: set[int] = set()

    def __bool__(self) -> bool:
        """False when nothing can be dropped any more (no aborted transaction pending or open),
        so a reader may skip the per-batch check."""
        return bool(self._pending or self._aborting)

    def drops(self, header: BatchHeader, data: bytes | bytearray | memoryview, pos: int) -> bool:
        """True when the batch at `pos` of `data` (its header parsed) is not for the reader:
        data of an aborted transaction, or any control batch (an ABORT marker also ends its
        producer's range here)."""
        pending = self._pending
        while pending and pending[-1][1] <= header.base_offset + header.last_offset_delta:
            self._aborting.add(pending.pop()[0])
        attributes = header.attributes
        if attributes & CONTROL_MASK:
            if (
                header.producer_id in self._aborting
                and parse_end_txn_marker(data, pos).control_type is ControlRecordType.ABORT
            ):
                self._aborting.discard(header.producer_id)
            return True
        return bool(attributes & TRANSACTIONAL_MASK) and header.producer_id in self._aborting
