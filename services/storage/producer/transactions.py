"""The open transactions of one partition and its first unstable offset (Kafka's
ProducerStateManager `ongoingTxns` / `unreplicatedTxns` and `firstUnstableOffset`, KIP-98).

A producer's transaction opens at the first offset of its first transactional data batch here
and completes at its COMMIT or ABORT marker. Until the marker is below the high watermark the
transaction is still unstable: a leader change could lose the marker while the data stays, so
read_committed readers must not pass its first offset yet. The first unstable offset is the
smallest first offset of the transactions open or completed above the high watermark; the
last stable offset (LSO) is min(first unstable offset, high watermark): read_committed readers
read below it. Pure: the manager feeds it offsets, the caller gives the high watermark.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction its marker completed: producer, first data offset, marker offset, and
    the first unstable offset of the others at that moment (Kafka's lastStableOffset(txn),
    the value an aborted transaction's index entry records)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int


class OngoingTxns:
    """Open and unreplicated transactions of one partition. Event-loop thread only."""

    __slots__ = ("_ongoing", "_unreplicated")

    def __init__(self) -> None:
        self._ongoing: dict[int, int] = {}  # producer id -> first offset
        self._unreplicated: list[CompletedTxn] = []  # in marker order

    @property
    def ongoing(self) -> dict[int, int]:
        return dict(self._ongoing)

    def clear(self) -> None:
        self._ongoing.clear()
        self._unreplicated.clear()

    def begin(self, producer_id: int, first_offset: int) -> None:
        """A transactional data batch at `first_offset`: opens the producer's transaction
        unless one is open (its later batches change nothing)."""
        self._ongoing.setdefault(producer_id, first_offset)

    def complete(self, producer_id: int, marker_offset: int, aborted: bool) -> CompletedTxn | None:
        """The producer's marker at `marker_offset` ends its open transaction; None when none
        was open (a marker of an empty transaction, or a retry)."""
        first = self._ongoing.pop(producer_id, None)
        if first is None:
            return None
        others = min(self._ongoing.values(), default=marker_offset + 1)
        done = CompletedTxn(producer_id, first, marker_offset, aborted, others)
        self._unreplicated.append(done)
        return done

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The smallest first offset of a transaction open or completed at or above the high
        watermark (those whose marker is below it are forgotten); None when there is none."""
        keep = [t for t in self._unreplicated if t.last_offset >= high_watermark]
        if len(keep) != len(self._unreplicated):
            self._unreplicated = keep
        firsts = [t.first_offset for t in keep]
        firsts.extend(self._ongoing.values())
        return min(firsts, default=None)

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(first unstable offset, high watermark)."""
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)
