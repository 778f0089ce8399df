"""The transactional producer's state machine (Kafka's client `TransactionManager.State`) and
how an error leaves it: fatal (the producer can only be closed), abortable (the transaction
must be aborted, then the producer goes on) or retriable (the call is tried again).

The states say which calls are allowed: `send` only in a transaction, `begin_transaction` only
when ready, `commit_transaction` not after an abortable error. Keeping the table beside the
states makes a call in the wrong state a clear `TransactionStateError` naming both, and an
internal wrong move a bug that shows at once.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from riverlog.common.errors import ErrorCode, RiverlogError


class TxnState(enum.Enum):
    UNINITIALIZED = "Uninitialized"  # before init_transactions
    INITIALIZING = "Initializing"  # InitProducerId in flight
    READY = "Ready"  # may begin a transaction
    IN_TRANSACTION = "InTransaction"  # may send, add offsets, commit or abort
    COMMITTING_TRANSACTION = "CommittingTransaction"  # flushing, then EndTxn(commit)
    ABORTING_TRANSACTION = "AbortingTransaction"  # dropping unsent batches, then EndTxn(abort)
    ABORTABLE_ERROR = "AbortableError"  # only abort_transaction is allowed
    FATAL_ERROR = "FatalError"  # only close is allowed

    def __str__(self) -> str:
        return self.value


_T = TxnState
VALID_PREVIOUS: Final[Mapping[TxnState, frozenset[TxnState]]] = MappingProxyType(
    {
        _T.UNINITIALIZED: frozenset(),
        _T.INITIALIZING: frozenset({_T.UNINITIALIZED, _T.ABORTING_TRANSACTION}),
        _T.READY: frozenset({_T.INITIALIZING, _T.COMMITTING_TRANSACTION, _T.ABORTING_TRANSACTION}),
        _T.IN_TRANSACTION: frozenset({_T.READY}),
        _T.COMMITTING_TRANSACTION: frozenset({_T.IN_TRANSACTION}),
        _T.ABORTING_TRANSACTION: frozenset({_T.IN_TRANSACTION, _T.ABORTABLE_ERROR}),
        _T.ABORTABLE_ERROR: frozenset(
            {_T.IN_TRANSACTION, _T.COMMITTING_TRANSACTION, _T.ABORTABLE_ERROR, _T.INITIALIZING}
        ),
        _T.FATAL_ERROR: frozenset(_T),
    }
)
"""Kafka's `TransactionManager.State.isTransitionValid`."""


class TransactionStateError(RiverlogError):
    """A transactional call made in a state that does not allow it (e.g. send before
    begin_transaction, commit after an abortable error)."""

    code = ErrorCode.INVALID_TXN_STATE


class FatalTransactionError(RiverlogError):
    """The producer can do nothing more but close: it was fenced by a newer instance with the
    same transactional.id (PRODUCER_FENCED), or the coordinator refused it for good."""


class AbortableTransactionError(RiverlogError):
    """The transaction cannot commit; `abort_transaction()` and go on with a new one."""


FATAL: Final = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    }
)
"""Kafka's fatal transaction errors: the producer's identity or its use is wrong."""

RETRIABLE: Final = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
    }
)
"""Answers to a coordinator call that mean: the same call again, after a pause."""


def classify(error: RiverlogError) -> RiverlogError:
    """The error as the application sees it: fatal, abortable, or the retriable one itself."""
    if error.code in RETRIABLE or isinstance(
        error, FatalTransactionError | AbortableTransactionError
    ):
        return error
    if error.code in FATAL:
        return FatalTransactionError(error.message, error.code)
    return AbortableTransactionError(error.message, error.code)


class TxnStateMachine:
    """The current state and the error that put it there. Guarded by the producer's lock."""

    __slots__ = ("error", "state")

    def __init__(self) -> None:
        self.state = TxnState.UNINITIALIZED
        self.error: RiverlogError | None = None

    def require(self, *states: TxnState, action: str) -> None:
        """Raise unless in one of `states`: the error that caused an error state, else a
        TransactionStateError naming the action and the state."""
        if self.state in states:
            return
        if self.state is TxnState.FATAL_ERROR and self.error is not None:
            raise self.error
        if self.state is TxnState.ABORTABLE_ERROR and self.error is not None:
            raise AbortableTransactionError(
                f"cannot {action}: the transaction must be aborted ({self.error.message})",
                self.error.code,
            )
        raise TransactionStateError(f"cannot {action} in state {self.state}")

    def transition_to(self, target: TxnState, error: RiverlogError | None = None) -> None:
        """Move to `target` (raises RuntimeError when the table does not allow it: a bug). An
        error state keeps its error; a fatal state is never left."""
        if self.state is TxnState.FATAL_ERROR:
            return
        if self.state not in VALID_PREVIOUS[target]:
            raise RuntimeError(f"transactional producer: {self.state} -> {target} is not valid")
        self.state = target
        self.error = error if target in (_T.ABORTABLE_ERROR, _T.FATAL_ERROR) else None

    def fail(self, error: RiverlogError) -> RiverlogError:
        """Enter the error state `error` calls for; the error as the application sees it."""
        seen = classify(error)
        abortable = isinstance(seen, AbortableTransactionError)
        if abortable and self.state not in VALID_PREVIOUS[TxnState.ABORTABLE_ERROR]:
            # An abort that cannot complete leaves nothing to go back to.
            seen = FatalTransactionError(seen.message, seen.code)
        if isinstance(seen, FatalTransactionError):
            self.transition_to(TxnState.FATAL_ERROR, seen)
        elif isinstance(seen, AbortableTransactionError):
            self.transition_to(TxnState.ABORTABLE_ERROR, seen)
        return seen
