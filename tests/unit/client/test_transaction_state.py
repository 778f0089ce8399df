"""The transactional producer's state machine: Kafka's valid moves, calls refused in the wrong
state with a clear error, and errors sorted into fatal, abortable and retriable."""

from __future__ import annotations

import pytest

from riverlog.client.producer.transaction_state import (
    VALID_PREVIOUS,
    AbortableTransactionError,
    FatalTransactionError,
    TransactionStateError,
    TxnState,
    TxnStateMachine,
    classify,
)
from riverlog.common.errors import ErrorCode, RiverlogError

pytestmark = pytest.mark.timeout(10)
T = TxnState


def machine_in(*path: TxnState) -> TxnStateMachine:
    machine = TxnStateMachine()
    for state in path:
        machine.transition_to(state)
    return machine


def test_a_transaction_goes_round_and_back_to_ready() -> None:
    m = machine_in(T.INITIALIZING, T.READY, T.IN_TRANSACTION, T.COMMITTING_TRANSACTION, T.READY)
    m.transition_to(T.IN_TRANSACTION)
    m.transition_to(T.ABORTING_TRANSACTION)
    m.transition_to(T.READY)
    assert m.state is T.READY and m.error is None


def test_invalid_moves_are_bugs() -> None:
    with pytest.raises(RuntimeError, match="Uninitialized -> InTransaction"):
        TxnStateMachine().transition_to(T.IN_TRANSACTION)
    assert VALID_PREVIOUS[T.UNINITIALIZED] == frozenset()  # nothing goes back there


def test_a_call_in_the_wrong_state_names_the_action_and_the_state() -> None:
    m = machine_in(T.INITIALIZING, T.READY)
    with pytest.raises(TransactionStateError, match="cannot send in state Ready") as err:
        m.require(T.IN_TRANSACTION, action="send")
    assert err.value.code is ErrorCode.INVALID_TXN_STATE
    m.require(T.READY, action="begin a transaction")  # allowed: no error


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        (ErrorCode.PRODUCER_FENCED, FatalTransactionError),
        (ErrorCode.INVALID_PRODUCER_EPOCH, FatalTransactionError),
        (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, FatalTransactionError),
        (ErrorCode.TOPIC_AUTHORIZATION_FAILED, AbortableTransactionError),
        (ErrorCode.NOT_ENOUGH_REPLICAS, AbortableTransactionError),
        (ErrorCode.TRANSACTION_ABORTABLE, AbortableTransactionError),
        (ErrorCode.CONCURRENT_TRANSACTIONS, RiverlogError),
        (ErrorCode.NOT_COORDINATOR, RiverlogError),
    ],
)
def test_errors_are_sorted_as_kafka_sorts_them(code: ErrorCode, kind: type) -> None:
    seen = classify(RiverlogError(code=code))
    assert type(seen) is kind and seen.code is code


def test_an_abortable_error_allows_only_abort_and_keeps_its_cause() -> None:
    m = machine_in(T.INITIALIZING, T.READY, T.IN_TRANSACTION)
    seen = m.fail(RiverlogError("partition gone", ErrorCode.NOT_ENOUGH_REPLICAS))
    assert isinstance(seen, AbortableTransactionError) and m.state is T.ABORTABLE_ERROR
    with pytest.raises(AbortableTransactionError, match=r"must be aborted.*partition gone"):
        m.require(T.IN_TRANSACTION, action="commit")
    m.require(T.IN_TRANSACTION, T.ABORTABLE_ERROR, action="abort")
    m.transition_to(T.ABORTING_TRANSACTION)
    m.transition_to(T.READY)
    assert m.error is None


def test_a_fatal_error_is_never_left() -> None:
    m = machine_in(T.INITIALIZING, T.READY, T.IN_TRANSACTION)
    fenced = m.fail(RiverlogError(code=ErrorCode.PRODUCER_FENCED))
    assert isinstance(fenced, FatalTransactionError) and m.state is T.FATAL_ERROR
    m.transition_to(T.READY)  # ignored
    assert m.state is T.FATAL_ERROR
    with pytest.raises(FatalTransactionError):
        m.require(T.READY, action="begin a transaction")


def test_an_abort_that_fails_for_good_is_fatal() -> None:
    m = machine_in(T.INITIALIZING, T.READY, T.IN_TRANSACTION, T.ABORTING_TRANSACTION)
    seen = m.fail(RiverlogError(code=ErrorCode.NOT_ENOUGH_REPLICAS))
    assert isinstance(seen, FatalTransactionError) and m.state is T.FATAL_ERROR
