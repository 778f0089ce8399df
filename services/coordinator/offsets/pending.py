"""Transactional offsets not yet committed or aborted (Kafka's
`pendingTransactionalOffsetCommits`), for one `__consumer_offsets` partition, by producer id.

TxnOffsetCommit writes its offsets as the producer's transactional records; replaying them
(live, or when a new owner loads the partition) puts them here, invisible to OffsetFetch. The
transaction's marker in this partition then moves them to the committed offsets (COMMIT) or
drops them (ABORT). Markers carry the epoch the transaction ended with, bumped (KIP-890,
decision 0028), so a marker ends only what was written at an older epoch: a late or repeated
marker never ends the producer's next transaction, which writes at the bumped epoch.

Kept per partition, not per group, because the marker names a producer and a partition, and
one transaction may commit offsets for several groups of the partition. Pure state, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from riverlog.common.types import TopicPartition

from ..records import OffsetValue

GroupPartition = tuple[str, TopicPartition]


@dataclass(slots=True)
class PendingTransaction:
    """One producer's open transaction in this partition. `offsets` maps each group's
    partition to its last offset written in the transaction, or None when a plain OffsetCommit
    came after it (Kafka keeps the newer by log position: the plain one wins at the commit)."""

    producer_id: int
    producer_epoch: int
    next_sequence: int = 0
    offsets: dict[GroupPartition, OffsetValue | None] = field(default_factory=dict)


class PendingOffsets:
    """Owned by one shard task, like the `OffsetStore` it feeds."""

    def __init__(self) -> None:
        self.by_producer: dict[int, PendingTransaction] = {}

    def add(
        self,
        producer_id: int,
        producer_epoch: int,
        last_sequence: int,
        group_id: str,
        tp: TopicPartition,
        value: OffsetValue,
    ) -> None:
        """A transactional offset record was written. A newer epoch than the pending one
        starts over (the older transaction cannot still be open: its end bumped the epoch)."""
        pending = self.by_producer.get(producer_id)
        if pending is None or pending.producer_epoch < producer_epoch:
            pending = self.by_producer[producer_id] = PendingTransaction(
                producer_id, producer_epoch
            )
        elif pending.producer_epoch > producer_epoch:
            return  # storage fenced it; nothing of it can be in the log after a newer epoch
        pending.next_sequence = max(pending.next_sequence, last_sequence + 1)
        pending.offsets[(group_id, tp)] = value

    def superseded(self, group_id: str, tp: TopicPartition) -> None:
        """A plain commit (or a tombstone) of the group's partition was written after the
        pending ones: it stays the committed offset whatever the transactions do."""
        key = (group_id, tp)
        for pending in self.by_producer.values():
            if key in pending.offsets:
                pending.offsets[key] = None

    def complete(
        self, producer_id: int, marker_epoch: int, committed: bool
    ) -> list[tuple[str, TopicPartition, OffsetValue]]:
        """The producer's marker: what to make visible (nothing on ABORT, or when nothing of
        the producer older than the marker is pending). The pending entry is gone after."""
        pending = self.by_producer.get(producer_id)
        if pending is None or pending.producer_epoch >= marker_epoch:
            return []
        del self.by_producer[producer_id]
        if not committed:
            return []
        return [(g, tp, v) for (g, tp), v in sorted(pending.offsets.items()) if v is not None]

    def next_sequence(self, producer_id: int, producer_epoch: int) -> int:
        """The first sequence of the producer's next transactional batch here: 0 in a new
        epoch (what storage expects after the previous marker, or for a new producer)."""
        pending = self.by_producer.get(producer_id)
        if pending is None or pending.producer_epoch != producer_epoch:
            return 0
        return pending.next_sequence

    def newer_epoch(self, producer_id: int, producer_epoch: int) -> bool:
        """Something of the producer is pending at a newer epoch: this one is fenced."""
        pending = self.by_producer.get(producer_id)
        return pending is not None and pending.producer_epoch > producer_epoch

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        key = (group_id, tp)
        return any(key in p.offsets for p in self.by_producer.values())

    def partitions_of(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with a pending offset (DeleteGroups writes them tombstones,
        so a later commit brings none of them back)."""
        return {tp for p in self.by_producer.values() for g, tp in p.offsets if g == group_id}
