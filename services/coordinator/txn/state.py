"""The transaction state machine (Kafka's `TransactionState`): eight states, the states each may
be entered from, and one check that refuses anything else.

One transactional.id has one state. Requests read it to decide (AddPartitionsToTxn only while
Empty, Ongoing or complete; EndTxn only while Ongoing, or as a retry of the last end), and every
change the coordinator writes to `__transaction_state` names the state it moves to, so a state
that may not follow the current one is a coordinator bug caught before anything is written.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Final


class TransactionState(enum.Enum):
    """The value is Kafka's display name (DescribeTransactions, ListTransactions, tools)."""

    EMPTY = "Empty"
    """The producer has an id and an epoch and no transaction is open.
    transition: AddPartitionsToTxn => ONGOING; expiry => DEAD; InitProducerId => EMPTY;
    EndTxn abort => PREPARE_ABORT (nothing to mark: the epoch is bumped)."""

    ONGOING = "Ongoing"
    """Partitions (or the group offsets) were added; records may be written to them.
    transition: EndTxn commit => PREPARE_COMMIT; EndTxn abort or timeout => PREPARE_ABORT;
    InitProducerId of a new session => PREPARE_EPOCH_FENCE, then PREPARE_ABORT."""

    PREPARE_COMMIT = "PrepareCommit"
    """The decision to commit is durable; commit markers are being written.
    transition: every partition has its marker => COMPLETE_COMMIT."""

    PREPARE_ABORT = "PrepareAbort"
    """The decision to abort is durable; abort markers are being written.
    transition: every partition has its marker => COMPLETE_ABORT."""

    COMPLETE_COMMIT = "CompleteCommit"
    """Committed; the transaction's partitions are forgotten.
    transition: AddPartitionsToTxn => ONGOING; InitProducerId => EMPTY; expiry => DEAD."""

    COMPLETE_ABORT = "CompleteAbort"
    """Aborted; the transaction's partitions are forgotten.
    transition: AddPartitionsToTxn => ONGOING; InitProducerId => EMPTY; expiry => DEAD."""

    DEAD = "Dead"
    """transactional.id.expiration.ms passed without a transaction: the id is being removed
    (a tombstone is written). transition: none."""

    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    """A new session (InitProducerId) or the timeout found a transaction open: the epoch is
    bumped so the old producer is fenced, and the transaction is then aborted.
    transition: => PREPARE_ABORT."""

    def __str__(self) -> str:
        return self.value


_S = TransactionState
VALID_PREVIOUS_STATES: Final[Mapping[TransactionState, frozenset[TransactionState]]] = (
    MappingProxyType(
        {
            _S.EMPTY: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
            _S.ONGOING: frozenset({_S.ONGOING, _S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
            _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
            _S.PREPARE_ABORT: frozenset(
                {
                    _S.ONGOING,
                    _S.PREPARE_EPOCH_FENCE,
                    _S.EMPTY,
                    _S.COMPLETE_COMMIT,
                    _S.COMPLETE_ABORT,
                }
            ),
            _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
            _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
            _S.DEAD: frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT}),
            _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
        }
    )
)
"""Kafka's `validPreviousStates`, with KIP-890's abort when no transaction is open (from Empty or
a completed one): it has no partitions to mark and only bumps the epoch, which fences whatever
the previous epoch still has in flight."""

COMPLETE: Final = frozenset({_S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
PREPARING: Final = frozenset({_S.PREPARE_COMMIT, _S.PREPARE_ABORT})


class IllegalStateTransition(RuntimeError):
    """A move the table does not allow: a coordinator bug, never a client error."""


def check_transition(current: TransactionState, target: TransactionState) -> None:
    """Raise IllegalStateTransition when `target` may not follow `current`."""
    if current not in VALID_PREVIOUS_STATES[target]:
        allowed = sorted(s.value for s in VALID_PREVIOUS_STATES[target])
        raise IllegalStateTransition(
            f"a transaction cannot move from {current} to {target} (allowed from {allowed})"
        )
