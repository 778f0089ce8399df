"""The idempotent producer's bookkeeping (the idempotent part of Kafka's TransactionManager):
the producer id and epoch, and per partition the next sequence number, the last acknowledged
one and the window of batches that hold sequences, from the oldest one without an outcome.

Sequences are assigned when the sender drains a batch, and a retry resends the same bytes with
the same sequence, so the leader drops a batch it already has and answers with the offsets of
the first write, as long as it is among the producer's last PRODUCER_BATCH_WINDOW (40) batches
the leader remembers. Hence the window: from the oldest batch without a final outcome
(acknowledged, or failed) to the newest, acknowledged ones in between included, at most that
many batches of a partition are ever sent; a batch whose request timed out still counts until
it is resolved (Kafka bounds the same with five batches and five requests on one ordered
connection, which it closes on a timeout; we keep more because acks=all waits on follower round
trips, and our requests travel on separate HTTP/2 streams where a stalled one can be
overtaken). A retry goes back into its
partition's queue in sequence order and goes alone, after the partition's requests on the wire.

Errors, as Kafka 2.5+ (KIP-360) handles them for a producer without transactions, and one rule
above all: a batch that may have been written is never sent again under a new epoch.
OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the next expected one is retried as it is;
for a batch sent as the next expected one it is a proven gap: the partition's open batches take
sequences of a new epoch once its requests are back (unless an earlier attempt of the refused
batch may still land). For a batch older than an acknowledged sequence it fails
(Kafka's OutOfOrderSequenceException): written, it would have been answered as a duplicate, but
it cannot go in under this epoch and must not go under another. A batch that fails after an
attempt that got no answer (delivery.timeout.ms, retries) leaves its sequence unresolved: no new
batch of the partition is sent until the batches after it settle; a later one acknowledged
proves it written, else the next epoch starts with new batches only. A batch refused for good
bumps the epoch and rewrites the partition's open batches (they cannot be written without it).
The first batch of an epoch travels alone until acknowledged, since a leader that does not know
the producer takes any sequence. An epoch at its maximum gets a new producer id instead
(InitProducerId again).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import PRODUCER_BATCH_WINDOW

from .batch import ProducerBatch

log = logging.getLogger(__name__)

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_PRODUCER_EPOCH: Final = 32767
MAX_BATCHES_ON_THE_WIRE: Final = PRODUCER_BATCH_WINDOW  # per partition: what the leader keeps
_SEQUENCE_MASK = 0x7FFFFFFF
_NONE = -1

TopicPartitionKey = tuple[str, int]

# Leader answers that say the batch was not appended (the others, and a request that got no
# answer, leave it possibly written).
_NOT_APPENDED: Final = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.INVALID_REQUIRED_ACKS,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_TIMESTAMP,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.INVALID_RECORD,
        ErrorCode.THROTTLING_QUOTA_EXCEEDED,
        ErrorCode.DELEGATION_TOKEN_EXPIRED,  # a direct frame under a spent grant (0047)
    }
)


def leaves_outcome_unknown(leader_answer: ErrorCode | None) -> bool:
    """Whether an attempt that ended this way may have been written: no answer from the leader
    (`None`: the request failed or timed out on the way) or an answer that does not say the
    batch was refused before the append (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
    return leader_answer is None or leader_answer not in _NOT_APPENDED


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int = NO_PRODUCER_ID
    epoch: int = NO_PRODUCER_EPOCH

    @property
    def is_valid(self) -> bool:
        return self.producer_id >= 0


def _last_sequence(batch: ProducerBatch) -> int:
    return (batch.base_sequence + batch.count - 1) & _SEQUENCE_MASK


@dataclass(slots=True)
class _PartitionSequences:
    owner: ProducerIdAndEpoch = field(default_factory=ProducerIdAndEpoch)
    next_sequence: int = 0
    last_acked: int = _NONE
    sending: int = 0  # batches of this partition on the wire
    retry_waiting: bool = False
    # The batches of `owner` from the oldest one without a final outcome to the newest, in
    # sequence order (settled ones stay while an older one is open): at most the window, so a write
    # whose answer was lost is among the leader's remembered batches whenever it is retried.
    window: list[ProducerBatch] = field(default_factory=list)
    settled: set[ProducerBatch] = field(default_factory=set)
    # Batches sent with no earlier sequence outstanding: only their OUT_OF_ORDER is a real gap
    # (requests on separate HTTP/2 streams may reach the leader out of order).
    sent_first: set[ProducerBatch] = field(default_factory=set)
    # The last sequence of a batch that failed with its outcome unknown (Kafka's unresolved
    # sequence): no new batch goes out until it is resolved.
    unresolved_end: int = _NONE
    # A gap was proven: once the wire is clear, the open batches get sequences of the new epoch.
    rewrite: bool = False

    def open_batches(self) -> list[ProducerBatch]:
        return [b for b in self.window if b not in self.settled]

    def settle(self, batch: ProducerBatch) -> None:
        if batch in self.window:
            self.settled.add(batch)
        self.sent_first.discard(batch)
        while self.window and self.window[0] in self.settled:
            self.settled.discard(self.window.pop(0))


class IdempotenceManager:
    """Lifecycle: built by the sender when enable.idempotence is on; `set_producer_id` once
    InitProducerId answered; then the sender thread calls `before_drain` at every turn,
    `blocked` / `capacity` / `assign` at drain, `on_response` for every batch whose request
    came back, and `on_success` / `can_retry` / `on_retry` / `on_failed` as it settles them.
    `producer_id_and_epoch` may be read from any thread."""

    def __init__(self, on_bump: Callable[[str], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._current = ProducerIdAndEpoch()
        self._partitions: dict[TopicPartitionKey, _PartitionSequences] = {}
        self._bump_required = False
        # A transactional producer never bumps its epoch alone: `on_bump` hears why instead
        # (the transaction must abort), and `reset_producer_id` brings EndTxn's new epoch.
        self._on_bump = on_bump
        self._reset_to: ProducerIdAndEpoch | None = None

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

    def reset_producer_id(self, producer_id: int, epoch: int) -> None:
        """Any thread: the transactional producer's next id and epoch (InitProducerId, EndTxn).
        The sender applies it before its next drain, when nothing of the old epoch is open:
        every partition's sequences start again at 0."""
        with self._lock:
            self._reset_to = ProducerIdAndEpoch(producer_id, epoch)

    def request_epoch_bump(self, tp: TopicPartitionKey, why: str, rewrite: bool = False) -> None:
        """Ask for the next epoch; with `rewrite`, `tp`'s open batches were proven unwritten
        and take sequences of the new epoch once its requests on the wire are back."""
        if self._on_bump is not None:
            log.info("%s-%d: %s", tp[0], tp[1], why)
            self._on_bump(f"{tp[0]}-{tp[1]}: {why}")
            return
        log.info("%s-%d: %s; bumping the producer epoch", tp[0], tp[1], why)
        self._bump_required = True
        p = self._partitions.get(tp)
        if rewrite and p is not None:
            p.rewrite = True

    def before_drain(self) -> None:
        """Sender loop, before draining: apply a requested bump (the next epoch, or no id so
        that InitProducerId is asked again when the epoch is at its maximum), resolve
        unresolved sequences whose partition has nothing left open, and give the batches of a
        rewritten partition new sequences once its requests are back."""
        if self._reset_to is not None:
            with self._lock:
                self._current, self._reset_to = self._reset_to, None
            self._partitions.clear()
            self._bump_required = False
            log.info("producer id and epoch now %s", self._current)
        for tp, p in self._partitions.items():
            if p.unresolved_end != _NONE and not p.sending and not p.open_batches():
                if p.last_acked != _NONE and _after_or_at(p.last_acked, p.unresolved_end):
                    p.unresolved_end = _NONE  # a later batch was taken: it was written
                else:
                    # Everything sent has an outcome and none proves it written: new batches
                    # start a new epoch (nothing sent is ever sent again under it).
                    p.unresolved_end = _NONE
                    self.request_epoch_bump(tp, "a sequence stays unresolved")
        if self._bump_required:
            self._bump_required = False
            with self._lock:
                current = self._current
                if current.epoch >= MAX_PRODUCER_EPOCH:
                    self._current = ProducerIdAndEpoch()
                else:
                    self._current = ProducerIdAndEpoch(current.producer_id, current.epoch + 1)
            log.info("producer epoch bumped to %s", self._current)
        for p in self._partitions.values():
            if p.rewrite and not p.sending and p.owner != self._current:
                for batch in p.open_batches():
                    batch.owner, batch.base_sequence = None, -1  # build() restamps its bytes
                p.window.clear()
                p.settled.clear()
                p.sent_first.clear()
                p.rewrite, p.unresolved_end = False, _NONE

    # ---- draining ------------------------------------------------------------------------

    def blocked(self) -> set[TopicPartitionKey]:
        """Partitions that must not be drained now: a retry waits for their requests on the
        wire, or their open batches wait for the sequences of the new epoch."""
        return {
            tp for tp, p in self._partitions.items() if p.rewrite or (p.sending and p.retry_waiting)
        }

    def capacity(self, tp: TopicPartitionKey) -> int:
        """How many new batches (without a sequence) of `tp` may be sent now. A batch holding a
        sequence is in the window already and goes alone. The window, from the oldest batch
        without a final outcome to the newest, holds at most the window: the batches a leader
        remembers, so a write whose answer was lost is answered as a duplicate on retry.
        Nothing new while a sequence is unresolved or while batches of an older epoch are
        open; and the first batch of an epoch travels alone until it is acknowledged (a leader
        that does not know the producer takes any sequence, KIP-360: a later batch overtaking
        the first on another HTTP/2 stream would be taken and the first refused)."""
        p = self._partitions.get(tp)
        if p is None:
            return 1
        if p.unresolved_end != _NONE or p.rewrite:
            return 0
        if p.owner != self._current:
            return 0 if p.open_batches() else 1
        if p.last_acked == _NONE:
            return 0 if p.window else 1
        return MAX_BATCHES_ON_THE_WIRE - len(p.window)

    def assign(self, batch: ProducerBatch) -> None:
        """Before `batch` is built and sent: a batch holding a sequence (a retry) keeps it, and
        its bytes, whatever the epoch is now; a new one gets the current id and epoch and the
        partition's next sequence (from 0 when the partition starts the current epoch)."""
        tp = (batch.topic, batch.partition)
        p = self._partitions.get(tp)
        if p is None:
            p = self._partitions[tp] = _PartitionSequences()
        if batch.base_sequence < 0 or batch.owner != p.owner:
            current = self._current
            if p.owner != current:
                p.owner, p.next_sequence, p.last_acked = current, 0, _NONE
                p.window.clear()
                p.settled.clear()
                p.sent_first.clear()
            batch.producer_id, batch.producer_epoch = current.producer_id, current.epoch
            batch.owner, batch.base_sequence = current, p.next_sequence
            p.next_sequence = (p.next_sequence + batch.count) & _SEQUENCE_MASK
            p.window.append(batch)
        if any(b.base_sequence < batch.base_sequence for b in p.open_batches()):
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
        if p is None or batch.owner != p.owner:
            return
        p.settle(batch)
        last = _last_sequence(batch)
        if p.last_acked == _NONE or _after_or_at(last, p.last_acked):
            p.last_acked = last
        if p.unresolved_end != _NONE and _after_or_at(p.last_acked, p.unresolved_end):
            p.unresolved_end = _NONE  # taken after it: the unresolved batch was written

    def can_retry(self, batch: ProducerBatch, error: RiverlogError) -> bool:
        """Whether `batch` may be sent again after `error` (Kafka's canRetry, for HTTP/2
        streams that may overtake each other)."""
        tp = (batch.topic, batch.partition)
        p = self._partitions.get(tp)
        if p is None or batch.owner != p.owner:
            return error.retriable
        if error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER:
            if p.last_acked != _NONE and _after_or_at(p.last_acked, _last_sequence(batch)):
                # The leader took later sequences. Were it written, it would be among the
                # leader's remembered batches and answered as a duplicate; refused, it was not
                # written when the leader checked it, but it cannot be sure that it never will
                # be, nor go in under this epoch: it fails (Kafka's OutOfOrderSequenceException),
                # it is never sent again under a new epoch, and later batches go on.
                log.warning(
                    "%s-%d: sequence %d refused after later ones were taken; failing the batch",
                    tp[0],
                    tp[1],
                    batch.base_sequence,
                )
                return False
            expected = (p.last_acked + 1) & _SEQUENCE_MASK
            if p.unresolved_end != _NONE:
                if batch.base_sequence == ((p.unresolved_end + 1) & _SEQUENCE_MASK):
                    # Right after the unresolved batch: it was not written (Kafka's
                    # isNextSequenceForUnresolvedPartition).
                    self._gap(tp, p, batch, f"sequence gap before {batch.base_sequence}")
                return True
            if batch.base_sequence == expected and batch in p.sent_first:
                self._gap(tp, p, batch, f"sequence gap before {batch.base_sequence}")
            return True  # an earlier batch failed first, or this one overtook it: again
        if error.code == ErrorCode.UNKNOWN_PRODUCER_ID:
            self._gap(tp, p, batch, "the leader does not know this producer")
            return True
        return error.retriable

    def _gap(
        self, tp: TopicPartitionKey, p: _PartitionSequences, batch: ProducerBatch, why: str
    ) -> None:
        """`batch` was refused and nothing before it is open: it and the open batches after it
        can go in under a new epoch, unless an earlier attempt of it may still land (then it is
        retried as it is until it resolves or expires)."""
        if batch.maybe_written:
            return
        self.request_epoch_bump(tp, why, rewrite=True)

    def on_retry(self, batch: ProducerBatch) -> None:
        p = self._partitions.get((batch.topic, batch.partition))
        if p is not None:
            p.retry_waiting = True

    def on_failed(self, batch: ProducerBatch) -> None:
        """`batch` failed for good. Refused for sure (no attempt left its outcome unknown): the
        open batches after it cannot be written either, so they take sequences of a new epoch.
        Possibly written: its sequence is unresolved until the batches after it settle."""
        p = self._partitions.get((batch.topic, batch.partition))
        if p is None or batch.owner != p.owner or batch not in p.window:
            return
        p.settle(batch)
        last = _last_sequence(batch)
        if p.last_acked != _NONE and _after_or_at(p.last_acked, last):
            return  # later sequences were taken: nothing to resolve
        tp = (batch.topic, batch.partition)
        if batch.maybe_written:
            if p.unresolved_end == _NONE or _after_or_at(last, p.unresolved_end):
                p.unresolved_end = last
            log.info(
                "%s-%d: sequence %d failed with its outcome unknown",
                tp[0],
                tp[1],
                batch.base_sequence,
            )
        elif p.unresolved_end == _NONE:
            self.request_epoch_bump(
                tp, f"batch at sequence {batch.base_sequence} failed", rewrite=True
            )


def _after_or_at(a: int, b: int) -> bool:
    """Sequence `a` is `b` or after it (sequences wrap at 2**31)."""
    return ((a - b) & _SEQUENCE_MASK) < (1 << 30)
