"""Pure builders for every change the transaction coordinator makes (Kafka's
`TransactionCoordinator` handlers and `TransactionMetadata.prepare*`), with the epoch bump of
KIP-890: every transaction ends with a new producer epoch, so a write or marker of the previous
transaction that arrives late is fenced instead of landing in the next one.

Each builder takes the current metadata (None: the transactional.id is unknown) and the request,
and returns a `Decision`: the error to answer, the metadata to write to `__transaction_state`
(None: nothing to write) and what the coordinator does once it is durable. Nothing here does I/O
or keeps state; the coordinator writes `decision.write`, makes it current, then follows up.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition

from .metadata import MAX_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TransactionMetadata
from .state import COMPLETE, PREPARING, TransactionState

State = TransactionState


class FollowUp(enum.Enum):
    NOTHING = enum.auto()
    WRITE_MARKERS = enum.auto()  # PrepareCommit/PrepareAbort is durable: mark every partition
    ABORT_FENCED = enum.auto()  # PrepareEpochFence is durable: abort the open transaction


@dataclass(frozen=True, slots=True)
class Decision:
    error: ErrorCode = ErrorCode.NONE
    write: TransactionMetadata | None = None
    then: FollowUp = FollowUp.NOTHING
    # What the answer reports (producer id and epoch) when nothing is written.
    current: TransactionMetadata | None = None

    @property
    def reply(self) -> TransactionMetadata | None:
        return self.write if self.write is not None else self.current


def refuse(error: ErrorCode) -> Decision:
    return Decision(error=error)


def init_producer_id(
    current: TransactionMetadata | None,
    transactional_id: str,
    timeout_ms: int,
    max_timeout_ms: int,
    now_ms: int,
    fresh_producer_id: Callable[[], int],
    expected: tuple[int, int] | None = None,
) -> Decision:
    """InitProducerId for a transactional.id: a new producer (or a new session of an old one)
    gets an id and a fresh epoch; a transaction the old session left open is fenced and aborted
    first (the client is told CONCURRENT_TRANSACTIONS and retries). `expected`, when given, is
    the id and epoch the client last had (KIP-360): anything else is PRODUCER_FENCED."""
    if not 0 < timeout_ms <= max_timeout_ms:
        return refuse(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
    if current is None or current.state is State.DEAD:
        created = TransactionMetadata(
            transactional_id,
            fresh_producer_id(),
            0,
            timeout_ms,
            State.EMPTY,
            last_update_ms=now_ms,
        )
        return Decision(write=created)
    if current.state in PREPARING or current.state is State.PREPARE_EPOCH_FENCE:
        return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
    if expected is not None and expected != (current.producer_id, current.producer_epoch):
        if _is_previous(current, *expected) and current.state is State.EMPTY:
            return Decision(current=current)  # a retry of the InitProducerId that bumped
        return refuse(ErrorCode.PRODUCER_FENCED)
    if current.state is State.ONGOING:
        return Decision(
            error=ErrorCode.CONCURRENT_TRANSACTIONS,
            write=_fence(current, now_ms),
            then=FollowUp.ABORT_FENCED,
        )
    producer_id, epoch, previous = _bumped(current, fresh_producer_id)
    return Decision(
        write=current.moved_to(
            State.EMPTY,
            now_ms,
            producer_id=producer_id,
            producer_epoch=epoch,
            previous_producer_id=previous,
            last_producer_epoch=current.producer_epoch,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            start_ms=-1,
        )
    )


def add_partitions(
    current: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
    now_ms: int,
) -> Decision:
    """AddPartitionsToTxn (and AddOffsetsToTxn, with the group's `__consumer_offsets`
    partition): the partitions join the open transaction, which opens if none is."""
    error = _check_producer(current, producer_id, producer_epoch)
    if error is not ErrorCode.NONE or current is None:
        return refuse(error if current is not None else ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if current.state in PREPARING or current.state is State.PREPARE_EPOCH_FENCE:
        return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
    if current.state is State.DEAD:
        return refuse(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    added = frozenset(partitions)
    if current.state is State.ONGOING and added <= current.partitions:
        return Decision(current=current)  # nothing new: no write
    start_ms = current.start_ms if current.state is State.ONGOING else now_ms
    return Decision(
        write=current.moved_to(
            State.ONGOING, now_ms, partitions=current.partitions | added, start_ms=start_ms
        )
    )


def verify_partitions(
    current: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    partitions: Iterable[TopicPartition],
) -> ErrorCode:
    """KIP-890 part 1: AddPartitionsToTxn with verify_only, a partition leader asking before a
    transactional batch's first write whether the partitions are in the producer's ongoing
    transaction at this epoch. Nothing is added or written. NONE when they all are; an older
    epoch is PRODUCER_FENCED, one the coordinator never handed out INVALID_PRODUCER_EPOCH;
    anything else (no transaction open, ending, or a partition not added) INVALID_TXN_STATE,
    so a late write of an ended transaction never opens a new one at the partition."""
    if current is None or current.state is State.DEAD:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_id != current.producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch < current.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    if producer_epoch > current.producer_epoch:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if current.state is not State.ONGOING or not frozenset(partitions) <= current.partitions:
        return ErrorCode.INVALID_TXN_STATE
    return ErrorCode.NONE


def admin_abort(current: TransactionMetadata | None, now_ms: int) -> Decision:
    """An operator aborts a hanging transaction (`riverlog transactions abort`): an open one
    is fenced and aborted exactly as transaction.timeout.ms does (its producer's next write
    or EndTxn is refused). One already ending is CONCURRENT_TRANSACTIONS (retry: it will be
    complete); with nothing open nothing changes."""
    if current is None or current.state is State.DEAD:
        return refuse(ErrorCode.TRANSACTIONAL_ID_NOT_FOUND)
    if current.state is State.ONGOING:
        return Decision(write=_fence(current, now_ms), then=FollowUp.ABORT_FENCED)
    if current.state in PREPARING or current.state is State.PREPARE_EPOCH_FENCE:
        return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
    return Decision(current=current)


def end_transaction(
    current: TransactionMetadata | None,
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    now_ms: int,
    fresh_producer_id: Callable[[], int],
    from_coordinator: bool = False,
) -> Decision:
    """EndTxn: write PrepareCommit or PrepareAbort with the epoch bumped, then the markers. A
    retry of the end that already happened (the client's previous epoch, the same result)
    answers as the first did; the other result is INVALID_TXN_STATE. `from_coordinator`: the
    abort after a fence or a timeout, which runs in PrepareEpochFence with the bumped epoch."""
    if current is None or current.state is State.DEAD:
        return refuse(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    target = State.PREPARE_COMMIT if commit else State.PREPARE_ABORT
    if _is_previous(current, producer_id, producer_epoch) and not from_coordinator:
        return _retried_end(current, target)
    error = _check_producer(current, producer_id, producer_epoch)
    if error is not ErrorCode.NONE:
        return refuse(error)
    state = current.state
    if state is State.PREPARE_EPOCH_FENCE:
        if not (from_coordinator and not commit):
            return refuse(ErrorCode.PRODUCER_FENCED)
        # The fence already bumped the epoch; the markers carry it.
        return Decision(
            write=current.moved_to(State.PREPARE_ABORT, now_ms), then=FollowUp.WRITE_MARKERS
        )
    if state in PREPARING:
        return refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
    if state is not State.ONGOING and commit:
        return refuse(ErrorCode.INVALID_TXN_STATE)  # nothing open to commit
    epoch, next_id = current.producer_epoch + 1, NO_PRODUCER_ID
    if epoch >= MAX_PRODUCER_EPOCH:
        epoch, next_id = MAX_PRODUCER_EPOCH, fresh_producer_id()
    return Decision(
        write=current.moved_to(
            target,
            now_ms,
            producer_epoch=epoch,
            last_producer_epoch=current.producer_epoch,
            next_producer_id=next_id,
        ),
        then=FollowUp.WRITE_MARKERS,
    )


def complete(current: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """Every partition has its marker: CompleteCommit or CompleteAbort, the partitions
    forgotten, and a pending rollover done (the new id at epoch 0)."""
    target = (
        State.COMPLETE_COMMIT if current.state is State.PREPARE_COMMIT else State.COMPLETE_ABORT
    )
    rollover: dict[str, object] = {}
    if current.next_producer_id != NO_PRODUCER_ID:
        rollover = {
            "producer_id": current.next_producer_id,
            "producer_epoch": 0,
            "previous_producer_id": current.producer_id,
            "next_producer_id": NO_PRODUCER_ID,
        }
    return current.moved_to(target, now_ms, partitions=frozenset(), start_ms=-1, **rollover)


def abort_expired(current: TransactionMetadata, now_ms: int) -> Decision | None:
    """transaction.timeout.ms passed with the transaction open: fence the producer's epoch
    (its next write or EndTxn is refused) and abort. None: nothing to do."""
    if not current.is_expired(now_ms):
        return None
    return Decision(write=_fence(current, now_ms), then=FollowUp.ABORT_FENCED)


def expire_id(
    current: TransactionMetadata, now_ms: int, expiration_ms: int
) -> TransactionMetadata | None:
    """transactional.id.expiration.ms passed with no transaction open: Dead (the coordinator
    writes a tombstone and forgets the id). None: not yet."""
    idle = current.state is State.EMPTY or current.state in COMPLETE
    if not idle or now_ms <= current.last_update_ms + expiration_ms:
        return None
    return current.moved_to(State.DEAD, now_ms)


def _fence(current: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """Bump the epoch of an open transaction the client did not end. The previous epoch is
    not kept: a late EndTxn with it is not a retry of anything, and is PRODUCER_FENCED."""
    epoch = min(current.producer_epoch + 1, MAX_PRODUCER_EPOCH)
    return current.moved_to(
        State.PREPARE_EPOCH_FENCE,
        now_ms,
        producer_epoch=epoch,
        last_producer_epoch=NO_PRODUCER_EPOCH,
    )


def _bumped(
    current: TransactionMetadata, fresh_producer_id: Callable[[], int]
) -> tuple[int, int, int]:
    """(producer id, epoch, previous id) after one bump; a new id at epoch 0 when exhausted."""
    if current.producer_epoch + 1 >= MAX_PRODUCER_EPOCH:
        return fresh_producer_id(), 0, current.producer_id
    return current.producer_id, current.producer_epoch + 1, current.previous_producer_id


def _check_producer(
    current: TransactionMetadata | None, producer_id: int, producer_epoch: int
) -> ErrorCode:
    if current is None:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_id != current.producer_id:
        if producer_id == current.next_producer_id:
            return ErrorCode.CONCURRENT_TRANSACTIONS  # the rollover completes with the markers
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if producer_epoch != current.producer_epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE


def _is_previous(current: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """The id and epoch the client held before the last bump (a retry of what bumped it)."""
    if current.last_producer_epoch < 0 or producer_epoch != current.last_producer_epoch:
        return False
    return producer_id in (current.producer_id, current.previous_producer_id)


def _retried_end(current: TransactionMetadata, target: TransactionState) -> Decision:
    """An EndTxn sent again with the epoch it was first sent with."""
    completed = State.COMPLETE_COMMIT if target is State.PREPARE_COMMIT else State.COMPLETE_ABORT
    if current.state in (target, completed):
        return Decision(current=current)
    if current.state in PREPARING or current.state in COMPLETE:
        return refuse(ErrorCode.INVALID_TXN_STATE)  # it ended the other way
    return refuse(ErrorCode.PRODUCER_FENCED)
