"""What a partition remembers of one producer: its epoch and its last batches (the window).

Kafka's ProducerStateEntry and BatchMetadata. A producer may have up to five produce requests
in flight per partition (max.in.flight.requests.per.connection), so a retry can repeat any of
its last five batches: remembering their sequence ranges and offsets lets the leader answer a
retried batch with the offsets it was first written at, instead of writing it twice. Only
headers feed this state (producer id, epoch, base sequence, last offset delta, max timestamp),
never records, except the one record of a transaction marker (its type and coordinator
epoch).

For transactions (Kafka's ProducerStateEntry.currentTxnFirstOffset and coordinatorEpoch): the
first offset of the producer's open transaction in this partition (-1: none), set by its first
transactional batch and cleared by the COMMIT or ABORT marker; and the epoch of the
transaction coordinator that wrote its last marker, so a marker from a deposed coordinator is
refused.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final

from riverlog.common.records.header import NO_PRODUCER_EPOCH, NO_SEQUENCE
from riverlog.common.types import PRODUCER_BATCH_WINDOW

BATCH_RETAIN: Final = PRODUCER_BATCH_WINDOW  # Kafka's NUM_BATCHES_TO_RETAIN (5 there)
MAX_SEQUENCE: Final = 0x7FFFFFFF
NO_OFFSET: Final = -1
NO_COORDINATOR_EPOCH: Final = -1


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer: sequence range, offset range, max timestamp."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    """One producer's state in one partition. Mutated only by its ProducerStateManager, on the
    storage node's event-loop thread."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCH_RETAIN))
    last_timestamp: int = -1
    current_txn_first_offset: int = NO_OFFSET
    coordinator_epoch: int = NO_COORDINATOR_EPOCH

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def add_batch(self, epoch: int, batch: BatchMetadata) -> None:
        """Remember an appended batch; a new epoch forgets the batches of the old one
        (Kafka's addBatch / maybeUpdateProducerEpoch)."""
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch
        self.batches.append(batch)
        self.last_timestamp = batch.timestamp

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch with exactly this epoch and sequence range, if any."""
        if epoch != self.producer_epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.producer_epoch,
            deque(self.batches, maxlen=BATCH_RETAIN),
            self.last_timestamp,
            self.current_txn_first_offset,
            self.coordinator_epoch,
        )


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """Whether `next_seq` follows `last_seq` (sequences wrap from 2^31-1 to 0, as Kafka's)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)
