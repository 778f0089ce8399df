"""What the transaction coordinator keeps per transactional.id (Kafka's `TransactionMetadata`),
as an immutable value: every change is a new value built by `transitions.py`, written to
`__transaction_state`, and only then made current, so a failed write leaves nothing behind.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

from riverlog.common.types import TopicPartition

from .state import TransactionState, check_transition

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
MAX_PRODUCER_EPOCH: Final = 32_767
"""Kafka's Short.MaxValue. An epoch that would pass it rolls the producer over to a new id at
epoch 0 (KIP-360), so a transactional.id can run transactions forever."""


@dataclass(frozen=True, slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition] = frozenset()
    # The epoch before the last bump: a retried EndTxn or InitProducerId carries it.
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # The id before the last rollover, for the same retries across it.
    previous_producer_id: int = NO_PRODUCER_ID
    # Set while a transaction ends with the epoch exhausted: the id the producer continues with.
    next_producer_id: int = NO_PRODUCER_ID
    start_ms: int = -1  # when the open transaction added its first partition
    last_update_ms: int = 0

    def moved_to(
        self, state: TransactionState, now_ms: int, **changes: object
    ) -> TransactionMetadata:
        """This metadata in `state` with `changes`; raises IllegalStateTransition when the state
        machine does not allow the move."""
        check_transition(self.state, state)
        return replace(self, state=state, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]

    @property
    def client_producer(self) -> tuple[int, int]:
        """The producer id and epoch the client is to use next (after a rollover: the new id at
        epoch 0)."""
        if self.next_producer_id != NO_PRODUCER_ID:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch

    def is_expired(self, now_ms: int) -> bool:
        """An open transaction past transaction.timeout.ms (the coordinator aborts it)."""
        return self.state is TransactionState.ONGOING and now_ms > self.start_ms + self.timeout_ms
