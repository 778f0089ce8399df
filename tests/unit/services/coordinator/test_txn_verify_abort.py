"""Two pure checks of the transaction coordinator: KIP-890 part 1's verification (a partition
leader asks, before a transactional first write, whether its partitions are in the producer's
ongoing transaction at this epoch: nothing is added), and an operator's abort of a hanging
transaction (fence and abort, as the timeout does)."""

from __future__ import annotations

import pytest

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.txn.metadata import TransactionMetadata
from riverlog.services.coordinator.txn.state import TransactionState
from riverlog.services.coordinator.txn.transitions import (
    FollowUp,
    abort_expired,
    admin_abort,
    verify_partitions,
)

pytestmark = pytest.mark.timeout(30)

S = TransactionState
E = ErrorCode
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


def meta(
    state: TransactionState, partitions: frozenset[TopicPartition] = frozenset()
) -> TransactionMetadata:
    return TransactionMetadata("t", 7, 3, 60_000, state, partitions, start_ms=0)


ONGOING = meta(S.ONGOING, frozenset({A0, B0}))


def test_verify_answers_none_only_for_partitions_of_the_ongoing_transaction() -> None:
    assert verify_partitions(ONGOING, 7, 3, [A0]) is E.NONE
    assert verify_partitions(ONGOING, 7, 3, [A0, B0]) is E.NONE
    assert verify_partitions(ONGOING, 7, 3, [A0, A1]) is E.INVALID_TXN_STATE  # A1 not added


@pytest.mark.parametrize(
    ("current", "pid", "epoch", "expected"),
    [
        (ONGOING, 7, 2, E.PRODUCER_FENCED),  # an older epoch: the ended transaction's late write
        (ONGOING, 7, 4, E.INVALID_PRODUCER_EPOCH),  # never handed out
        (ONGOING, 8, 3, E.INVALID_PRODUCER_ID_MAPPING),
        (None, 7, 3, E.INVALID_PRODUCER_ID_MAPPING),
        (meta(S.DEAD), 7, 3, E.INVALID_PRODUCER_ID_MAPPING),
        (meta(S.EMPTY), 7, 3, E.INVALID_TXN_STATE),  # nothing open
        (meta(S.COMPLETE_COMMIT), 7, 3, E.INVALID_TXN_STATE),
        (meta(S.PREPARE_COMMIT, frozenset({A0})), 7, 3, E.INVALID_TXN_STATE),  # ending
        (meta(S.PREPARE_ABORT, frozenset({A0})), 7, 3, E.INVALID_TXN_STATE),
        (meta(S.PREPARE_EPOCH_FENCE, frozenset({A0})), 7, 3, E.INVALID_TXN_STATE),
    ],
)
def test_verify_refusals(
    current: TransactionMetadata | None, pid: int, epoch: int, expected: ErrorCode
) -> None:
    assert verify_partitions(current, pid, epoch, [A0]) is expected


def test_admin_abort_of_an_open_transaction_is_the_timeout_path() -> None:
    decision = admin_abort(ONGOING, 100)
    timed_out = abort_expired(ONGOING, 10**9)
    assert timed_out is not None
    assert decision.error is E.NONE and decision.then is FollowUp.ABORT_FENCED
    assert decision.write is not None
    assert decision.write.state is S.PREPARE_EPOCH_FENCE
    assert decision.write.producer_epoch == 4  # the producer is fenced
    assert decision.write.partitions == ONGOING.partitions
    assert decision.then is timed_out.then
    assert decision.write.state is timed_out.write.state  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        (None, E.TRANSACTIONAL_ID_NOT_FOUND),
        (meta(S.DEAD), E.TRANSACTIONAL_ID_NOT_FOUND),
        (meta(S.PREPARE_COMMIT, frozenset({A0})), E.CONCURRENT_TRANSACTIONS),
        (meta(S.PREPARE_ABORT, frozenset({A0})), E.CONCURRENT_TRANSACTIONS),
        (meta(S.PREPARE_EPOCH_FENCE, frozenset({A0})), E.CONCURRENT_TRANSACTIONS),
    ],
)
def test_admin_abort_refusals(current: TransactionMetadata | None, expected: ErrorCode) -> None:
    decision = admin_abort(current, 100)
    assert decision.error is expected and decision.write is None


@pytest.mark.parametrize("state", [S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT])
def test_admin_abort_with_nothing_open_changes_nothing(state: TransactionState) -> None:
    decision = admin_abort(meta(state), 100)
    assert decision.error is E.NONE and decision.write is None
    assert decision.reply == meta(state)
