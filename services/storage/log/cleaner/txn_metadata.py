"""Which transactional batches one cleaning pass removes (Kafka's CleanedTransactionMetadata,
KIP-98): the data of aborted transactions, and markers with nothing left to mark.

Fed every batch of the pass in offset order, with the aborted transactions of the range (from
the .txnindex, ordered by first offset). A producer is "aborting" from its aborted
transaction's first offset until its ABORT marker: its transactional data batches there go.
Markers stay while data of their transaction is still in this pass's input, and may go once
none is (the caller then keeps them until their delete horizon, Kafka's two passes: the first
stamps the horizon, a later one after it removes them):

- an ABORT marker stays when batches of its transaction were seen (removed now): then the
  aborted transaction is indexed in the cleaned segment, so readers of what may still be in
  flight drop it; once a later pass sees no data, the marker may go and is not indexed;
- a COMMIT marker stays when kept data of its transaction was seen; a later pass in which the
  compaction removed it all may remove the marker.

The pass never reaches the first unstable offset, so every transaction it sees has ended.
Pure; one instance per pass (or per offset-map build) on the cleaner's thread.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from riverlog.common.records.control import ControlRecordType, EndTxnMarker
from riverlog.common.records.header import BatchHeader

from ..txn_index import AbortedTxn


@dataclass(slots=True)
class _Aborting:
    txn: AbortedTxn
    seen_data: bool = False


class CleanedTxnMetadata:
    """The transactional state of one pass; see the module docstring."""

    __slots__ = ("_aborting", "_committing", "_pending", "cleaned_index")

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        # A stack with the lowest first offset on top.
        self._pending = sorted(aborted, key=lambda t: t.first_offset, reverse=True)
        self._aborting: dict[int, _Aborting] = {}
        self._committing: set[int] = set()
        # The aborted transactions whose markers this pass keeps, for the cleaned .txnindex.
        self.cleaned_index: list[AbortedTxn] = []

    def _reach(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[-1].first_offset <= offset:
            txn = pending.pop()
            self._aborting[txn.producer_id] = _Aborting(txn)

    def on_data_batch(self, header: BatchHeader) -> bool:
        """Whether this data batch goes (it belongs to an aborted transaction)."""
        self._reach(header.last_offset)
        if not header.is_transactional or header.producer_id < 0:
            return False
        aborting = self._aborting.get(header.producer_id)
        if aborting is not None:
            aborting.seen_data = True
            return True
        self._committing.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, marker: EndTxnMarker | None) -> bool:
        """Whether this marker may go (subject to its delete horizon)."""
        self._reach(header.last_offset)
        pid = header.producer_id
        if marker is None:
            return False  # not a marker we understand: keep it
        if marker.control_type is ControlRecordType.ABORT:
            self._committing.discard(pid)
            aborting = self._aborting.pop(pid, None)
            if aborting is not None and aborting.seen_data:
                self.cleaned_index.append(aborting.txn)
                return False
            return True
        if pid in self._committing:
            self._committing.discard(pid)
            return False
        return True
