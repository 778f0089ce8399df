"""KIP-890 part 1 at the partition leader: is a transactional write part of an ongoing
transaction? Pure decisions; the call to the transaction coordinator is the caller's.

A transactional data batch from a producer with no open transaction here at that epoch (the
first write of a transaction to this partition, or a late write of one that already ended:
Jepsen's hanging transaction) must first be verified with the producer's coordinator
(AddPartitionsToTxn with verify_only). The verification runs off the append path; while it is
in flight a marker for the producer (or the transaction starting here) invalidates it, so the
append re-checks the producer state against the guard it started with (Kafka's
VerificationGuard). Once the transaction is open here, later batches need no call: nothing else
is cached.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from riverlog.common.errors import ErrorCode
from riverlog.common.records.header import BatchHeader

from .entry import NO_OFFSET, ProducerStateEntry

# Coordinator answers the producer can retry: Kafka turns them into NOT_ENOUGH_REPLICAS, a
# retriable produce error every client knows (AddPartitionsToTxnManager, Kafka 3.6).
_RETRIABLE: Final = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.REQUEST_TIMED_OUT,
    }
)


@dataclass(frozen=True, slots=True)
class VerificationNeeded:
    """The producer (at this epoch) whose transactional batch must be verified first."""

    producer_id: int
    producer_epoch: int


@dataclass(eq=False, slots=True)
class VerificationGuard:
    """Identity token of one verification: valid only while the producer state still holds
    this very object (a marker or the transaction's start at this partition removes it)."""

    producer_id: int
    producer_epoch: int


def verification_needed(
    headers: Iterable[BatchHeader], producers: Mapping[int, ProducerStateEntry]
) -> VerificationNeeded | None:
    """The first transactional data batch of the payload whose producer has no transaction
    open here at the batch's epoch; None when the payload needs no verification."""
    for h in headers:
        if h.producer_id < 0 or not h.is_transactional or h.is_control:
            continue
        entry = producers.get(h.producer_id)
        if (
            entry is None
            or entry.current_txn_first_offset == NO_OFFSET
            or entry.producer_epoch != h.producer_epoch
        ):
            return VerificationNeeded(h.producer_id, h.producer_epoch)
    return None


def guard_valid(
    needed: VerificationNeeded | None,
    guard: VerificationGuard | None,
    current: VerificationGuard | None,
) -> bool:
    """At the append: nothing to verify, or the guard the verification started with is still
    the producer's current one (no marker arrived meanwhile)."""
    if needed is None:
        return True
    return (
        guard is not None
        and guard is current
        and guard.producer_id == needed.producer_id
        and guard.producer_epoch == needed.producer_epoch
    )


def produce_error(coordinator_error: ErrorCode) -> ErrorCode:
    """The produce answer for a failed verification, as Kafka 3.6+ gives it: coordinator
    unavailability becomes the retriable NOT_ENOUGH_REPLICAS; PRODUCER_FENCED, which a produce
    response does not carry, becomes INVALID_PRODUCER_EPOCH; the rest (INVALID_TXN_STATE,
    INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING) as they are."""
    if coordinator_error in _RETRIABLE:
        return ErrorCode.NOT_ENOUGH_REPLICAS
    if coordinator_error is ErrorCode.PRODUCER_FENCED:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return coordinator_error
