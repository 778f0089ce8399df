"""The idempotent producer's bookkeeping (the idempotent part of Kafka's TransactionManager):
the producer id and epoch, and per partition the next sequence number, the last acknowledged
one and the batches that hold sequences but have no final outcome yet.

Sequences are assigned when the sender drains a batch, and a retry resends the same bytes with
the same sequence, so the leader can drop a batch it already has and answer with the offsets of
the first write. Order with up to five requests in flight: a retried batch goes back into its
partition's queue in sequence order, and a partition with a retry waiting sends nothing more
until its requests on the wire have come back, so the retry goes out before later batches.

Errors, as Kafka 2.5+ (KIP-360) handles them for a producer without transactions:
OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the next expected one (an earlier batch
failed first) is retried as is; for the next expected batch it means a real gap, so the epoch is
bumped. UNKNOWN_PRODUCER_ID bumps the epoch. A batch that fails for good (or expires) after its
sequence was assigned also bumps the epoch, or every later batch would meet the gap. After a
bump each partition starts again at sequence 0 once its requests of the old epoch have come back
(queued batches get new sequences, and new bytes, when drained). An epoch at its maximum gets a
new producer id instead (InitProducerId again).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError

from .batch import ProducerBatch

log = logging.getLogger(__name__)

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_PRODUCER_EPOCH: Final = 32767
MAX_BATCHES_ON_THE_WIRE: Final = 5  # per partition: the leader's last five batches
_SEQUENCE_MASK = 0x7FFFFFFF

TopicPartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH

    @property
    def is_valid(self) -> bool:
        return self.producer_id >= 0


@dataclass(slots=True)
class _PartitionSequences:
    owner: ProducerIdAndEpoch = field(default_factory=ProducerIdAndEpoch)
    next_sequence: int = 0
    last_acked: int = -1
    sending: int = 0  # batches of this partition on the wire
    retry_waiting: bool = False
    unresolved: set[ProducerBatch] = field(default_factory=set)
    # Batches sent with no earlier sequence outstanding: only their OUT_OF_ORDER is a real gap
    # (requests on separate HTTP/2 streams may reach the leader out of order).
    sent_first: set[ProducerBatch] = field(default_factory=set)


class IdempotenceManager:
    """Lifecycle: built by the sender when enable.idempotence is on; `set_producer_id` once
    InitProducerId answered; then the sender thread calls `assign` at drain, `on_response` for
    every batch whose request came back, and `on_success` / `can_retry` / `on_retry` /
    `on_failed` as it settles them. `producer_id_and_epoch` may be read from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._current = ProducerIdAndEpoch()
        self._partitions: dict[TopicPartitionKey, _PartitionSequences] = {}
        self._bump_required = False

    # ---- producer id and epoch -----------------------------------------------------------

    @property
    def producer_id_and_epoch(self) -> ProducerIdAndEpoch:
        with self._lock:
            return self._current

    def has_producer_id(self) -> bool:
        return self._current.is_valid

    def set_producer_id(self, producer_id: int, epoch: int) -> None:
        with self._lock:
            self._current = ProducerIdAndEpoch(producer_id, epoch)
        self._bump_required = False
        log.info("idempotent producer id %d, epoch %d", producer_id, epoch)

    def request_epoch_bump(self, tp: TopicPartitionKey, why: str) -> None:
        log.info("%s-%d: %s; bumping the producer epoch", tp[0], tp[1], why)
        self._bump_required = True

    def maybe_bump_epoch(self) -> None:
        """Apply a requested bump (sender loop, before draining): the next epoch, or no id
        (so InitProducerId is asked again) when the epoch is at its maximum."""
        if not self._bump_required:
            return
        self._bump_required = False
        with self._lock:
            current = self._current
            if current.epoch >= MAX_PRODUCER_EPOCH:
                self._current = ProducerIdAndEpoch()
            else:
                self._current = ProducerIdAndEpoch(current.producer_id, current.epoch + 1)
        log.info("producer epoch bumped to %s", self._current)

    # ---- draining ------------------------------------------------------------------------

    def blocked(self) -> set[TopicPartitionKey]:
        """Partitions that must not be drained now: a retry waits for their requests on the
        wire, or their sequences belong to an older epoch with requests still on the wire."""
        current = self._current
        return {
            tp
            for tp, p in self._partitions.items()
            if p.sending and (p.retry_waiting or p.owner != current)
        }

    def capacity(self, tp: TopicPartitionKey) -> int:
        """How many more batches of `tp` may go on the wire: at most five in all, the batches a
        leader remembers, so a lost answer is always answered as a duplicate on retry."""
        p = self._partitions.get(tp)
        return MAX_BATCHES_ON_THE_WIRE - (p.sending if p is not None else 0)

    def assign(self, batch: ProducerBatch) -> None:
        """Before `batch` is built and sent: give it the current id and epoch and the next
        sequence, unless it already holds a sequence of the current epoch (a retry)."""
        tp = (batch.topic, batch.partition)
        p = self._partitions.get(tp)
        if p is None:
            p = self._partitions[tp] = _PartitionSequences()
        current = self._current
        if p.owner != current and not p.sending:
            p.owner, p.next_sequence, p.last_acked = current, 0, -1
        if batch.owner != current:
            builder = batch.builder
            builder.producer_id, builder.producer_epoch = current.producer_id, current.epoch
            builder.base_sequence = p.next_sequence
            batch.owner, batch.base_sequence, batch.data = current, p.next_sequence, None
            p.next_sequence = (p.next_sequence + batch.count) & _SEQUENCE_MASK
            p.unresolved.add(batch)
        earlier = (
            b for b in p.unresolved if b.owner == current and b.base_sequence < batch.base_sequence
        )
        if any(earlier):
            p.sent_first.discard(batch)
        else:
            p.sent_first.add(batch)
        p.retry_waiting = False
        p.sending += 1

    # ---- outcomes ------------------------------------------------------------------------

    def on_response(self, batch: ProducerBatch) -> None:
        """The request carrying `batch` came back (any outcome) or was never sent."""
        p = self._partitions.get((batch.topic, batch.partition))
        if p is not None and p.sending:
            p.sending -= 1

    def on_success(self, batch: ProducerBatch) -> None:
        p = self._partitions.get((batch.topic, batch.partition))
        if p is None:
            return
        p.unresolved.discard(batch)
        p.sent_first.discard(batch)
        if batch.owner == p.owner:
            last = (batch.base_sequence + batch.count - 1) & _SEQUENCE_MASK
            p.last_acked = max(p.last_acked, last)

    def can_retry(self, batch: ProducerBatch, error: RiverlogError) -> bool:
        """Whether `batch` may be sent again after `error` (Kafka's canRetry)."""
        tp = (batch.topic, batch.partition)
        p = self._partitions.get(tp)
        if error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if p is None or batch.owner != self._current:
                return True  # its sequence is rewritten under the new epoch
            if 0 <= batch.base_sequence <= p.last_acked:
                # The leader took later sequences first (it did not know this producer yet, as
                # after KIP-360 it may): this one can only go in under a new epoch. It was not
                # written: a write would be among the leader's last five batches (at most five
                # requests in flight), and answered as a duplicate.
                self.request_epoch_bump(tp, f"sequence {batch.base_sequence} already passed")
                return True
            if batch.base_sequence != ((p.last_acked + 1) & _SEQUENCE_MASK):
                return True  # an earlier batch failed first: it resolves when that one does
            if batch not in p.sent_first:
                return True  # it overtook an earlier batch on the way: send it again
            self.request_epoch_bump(tp, f"sequence gap before {batch.base_sequence}")
            return True
        if error.code == ErrorCode.UNKNOWN_PRODUCER_ID:
            self.request_epoch_bump(tp, "the leader does not know this producer")
            return True
        return error.retriable

    def on_retry(self, batch: ProducerBatch) -> None:
        p = self._partitions.get((batch.topic, batch.partition))
        if p is not None:
            p.retry_waiting = True

    def on_failed(self, batch: ProducerBatch) -> None:
        """`batch` failed for good: if it held a sequence, later ones would meet a gap."""
        p = self._partitions.get((batch.topic, batch.partition))
        if p is None or batch not in p.unresolved:
            return
        p.unresolved.discard(batch)
        p.sent_first.discard(batch)
        if batch.owner == self._current:
            self.request_epoch_bump(
                (batch.topic, batch.partition), f"batch at sequence {batch.base_sequence} failed"
            )
