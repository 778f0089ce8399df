"""The transactional producer's decisions, with no I/O and no threads: which partitions must be
added to the transaction before the sender drains them, what a coordinator answer means for the
call that got it, how long to wait before trying again, and how a failed batch leaves the
transaction. The blocking `TransactionManager` and the sender act on them; an asyncio producer
can act on the same ones.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from .transaction_state import (
    RETRIABLE,
    AbortableTransactionError,
    FatalTransactionError,
    TxnState,
)

TopicPartitionKey = tuple[str, int]


class Outcome(enum.Enum):
    DONE = "done"  # the call succeeded
    RETRY = "retry"  # the same call again after a back-off, within the caller's deadline
    FAIL = "fail"  # the error goes to the state machine (fatal or abortable)


def outcome_of(error: RiverlogError | None) -> Outcome:
    """What a coordinator call's answer (None: NONE) asks for: Kafka's retriable transaction
    errors (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, ...) and
    transport failures the catalog marks retriable are tried again; the rest fail."""
    if error is None:
        return Outcome.DONE
    if error.code in RETRIABLE or error.retriable:
        return Outcome.RETRY
    return Outcome.FAIL


def deciding_error(errors: Iterable[RiverlogError]) -> RiverlogError | None:
    """The error that decides a call answered per partition (TxnOffsetCommit): one that fails
    it if any, else a retriable one (the whole request again: it is idempotent), else None."""
    retriable = None
    for error in errors:
        if outcome_of(error) is Outcome.FAIL:
            return error
        retriable = retriable or error
    return retriable


CONCURRENT_TRANSACTIONS_BACKOFF_MS = 20
"""Kafka's ADD_PARTITIONS_RETRY_BACKOFF_MS: CONCURRENT_TRANSACTIONS right after a commit means
the previous transaction's markers are being written, which takes milliseconds, not
retry.backoff.ms."""


def backoff_s(attempt: int, base_ms: int, max_ms: int, error: RiverlogError | None = None) -> float:
    """The pause before retry `attempt` (1, 2, ...): retry.backoff.ms doubling up to
    retry.backoff.max.ms (the caller adds jitter); from 20 ms for CONCURRENT_TRANSACTIONS."""
    if error is not None and error.code == ErrorCode.CONCURRENT_TRANSACTIONS:
        base_ms = min(base_ms, CONCURRENT_TRANSACTIONS_BACKOFF_MS)
    pause_ms: int = min(base_ms * 2 ** min(max(attempt - 1, 0), 16), max_ms)
    return pause_ms / 1000


def partitions_to_add(
    queued: Iterable[TopicPartitionKey], added: AbstractSet[TopicPartitionKey]
) -> list[TopicPartitionKey]:
    """The partitions with batches waiting that are not in the transaction yet, in order: the
    sender adds them with one AddPartitionsToTxn before it drains any of their batches (Kafka's
    TransactionManager.maybeAddPartition, done at drain rather than per record so that `send`
    does no transactional work)."""
    return sorted(tp for tp in queued if tp not in added)


def by_topic(partitions: Iterable[TopicPartitionKey]) -> dict[str, list[int]]:
    """{topic: [partition, ...]} in order, the shape of AddPartitionsToTxn and OffsetCommit."""
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(partitions):
        out.setdefault(topic, []).append(partition)
    return out


class DrainAction(enum.Enum):
    SEND = "send"  # drain the partitions already in the transaction
    HOLD = "hold"  # send nothing (no producer id yet, or ending: the batches wait)
    DROP = "drop"  # fail every queued batch (aborting, or the transaction cannot commit)


def drain_action(state: TxnState) -> DrainAction:
    """What the sender does with queued batches in `state` (Kafka's Sender: undrained batches
    of an aborting or failed transaction are failed, never sent)."""
    if state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
        return DrainAction.SEND
    if state in (TxnState.ABORTING_TRANSACTION, TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
        return DrainAction.DROP
    return DrainAction.HOLD


def batch_failure(state: TxnState, error: RiverlogError) -> RiverlogError | None:
    """The error a failed batch puts the transaction in, or None when it changes nothing: a
    batch failing while the transaction aborts was dropped on purpose. A leader refusing the
    epoch means a newer session holds the transactional id, so INVALID_PRODUCER_EPOCH from a
    partition is PRODUCER_FENCED, fatal (Kafka, KIP-588). INVALID_TXN_STATE from a partition
    is its leader's KIP-890 verification failing (the partition is not in the transaction
    the coordinator knows): abortable, as Kafka 3.6+ clients take it, unlike the coordinator's
    INVALID_TXN_STATE (a call in the wrong state), which stays fatal."""
    if state in (TxnState.ABORTING_TRANSACTION, TxnState.FATAL_ERROR):
        return None
    if error.code == ErrorCode.INVALID_TXN_STATE:
        return AbortableTransactionError(
            f"a partition leader found the write outside the transaction: {error.message}",
            error.code,
        )
    return fenced_or_same(error)


def fenced_or_same(error: RiverlogError) -> RiverlogError:
    """INVALID_PRODUCER_EPOCH, from a partition leader or the coordinator, means a newer
    session holds the transactional id: the application sees PRODUCER_FENCED, fatal (Kafka,
    KIP-588). Any other error is returned as it is."""
    if error.code in _FENCED:
        return FatalTransactionError(
            f"fenced by a newer producer with the same transactional.id: {error.message}",
            ErrorCode.PRODUCER_FENCED,
        )
    return error


_FENCED: Final = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.PRODUCER_FENCED})


def offsets_by_topic(
    offsets: Mapping[TopicPartition, tuple[int, str, int]],
) -> dict[str, list[tuple[int, int, str, int]]]:
    """{topic: [(partition, offset, metadata, leader epoch), ...]} in order, for
    TxnOffsetCommit; refuses negative offsets (nothing is sent)."""
    out: dict[str, list[tuple[int, int, str, int]]] = {}
    for tp, (offset, metadata, leader_epoch) in sorted(offsets.items()):
        if offset < 0:
            raise ValueError(f"{tp}: cannot commit the negative offset {offset}")
        out.setdefault(tp.topic, []).append((tp.partition, offset, metadata, leader_epoch))
    return out
