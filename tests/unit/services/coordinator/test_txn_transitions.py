"""The transaction coordinator's pure builders: Kafka's handler semantics, KIP-890's epoch bump
on every end, fencing of an old session, retries, timeouts, expiry and the epoch rollover."""

from __future__ import annotations

import itertools

import pytest

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.txn.metadata import MAX_PRODUCER_EPOCH, TransactionMetadata
from riverlog.services.coordinator.txn.state import (
    VALID_PREVIOUS_STATES,
    IllegalStateTransition,
    TransactionState,
    check_transition,
)
from riverlog.services.coordinator.txn.transitions import (
    Decision,
    FollowUp,
    abort_expired,
    add_partitions,
    complete,
    end_transaction,
    expire_id,
    init_producer_id,
)

pytestmark = pytest.mark.timeout(30)

S = TransactionState
A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
MAX_TIMEOUT = 900_000


def ids(start: int = 1000) -> itertools.count[int]:
    return itertools.count(start)


def written(decision: Decision) -> TransactionMetadata:
    assert decision.error is ErrorCode.NONE, decision
    assert decision.write is not None
    return decision.write


def new_producer(now: int = 0, timeout_ms: int = 60_000) -> TransactionMetadata:
    return written(init_producer_id(None, "t", timeout_ms, MAX_TIMEOUT, now, ids().__next__))


def ongoing(now: int = 10) -> TransactionMetadata:
    meta = new_producer()
    return written(add_partitions(meta, meta.producer_id, meta.producer_epoch, [A0, B0], now))


def ended(meta: TransactionMetadata, commit: bool, now: int = 20) -> TransactionMetadata:
    fresh = ids(5000).__next__
    prepared = written(
        end_transaction(meta, meta.producer_id, meta.producer_epoch, commit, now, fresh)
    )
    return complete(prepared, now + 1)


def test_every_state_has_its_previous_states_and_dead_is_final() -> None:
    assert set(VALID_PREVIOUS_STATES) == set(S)
    assert all(S.DEAD not in previous for previous in VALID_PREVIOUS_STATES.values())
    with pytest.raises(IllegalStateTransition, match="from Empty to PrepareCommit"):
        check_transition(S.EMPTY, S.PREPARE_COMMIT)


def test_a_new_transactional_id_gets_a_fresh_id_at_epoch_zero() -> None:
    meta = new_producer(now=5)
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (1000, 0, S.EMPTY)
    assert meta.last_update_ms == 5 and meta.partitions == frozenset()


@pytest.mark.parametrize("timeout_ms", [0, -1, MAX_TIMEOUT + 1])
def test_a_timeout_out_of_bounds_is_refused(timeout_ms: int) -> None:
    decision = init_producer_id(None, "t", timeout_ms, MAX_TIMEOUT, 0, ids().__next__)
    assert decision == Decision(error=ErrorCode.INVALID_TRANSACTION_TIMEOUT)


def test_init_again_bumps_the_epoch_of_the_same_id() -> None:
    meta = new_producer()
    again = written(init_producer_id(meta, "t", 30_000, MAX_TIMEOUT, 7, ids(9).__next__))
    assert (again.producer_id, again.producer_epoch) == (meta.producer_id, 1)
    assert again.timeout_ms == 30_000 and again.last_producer_epoch == 0


def test_a_new_session_fences_the_open_transaction_then_aborts_it() -> None:
    meta = ongoing()
    fence = init_producer_id(meta, "t", 60_000, MAX_TIMEOUT, 30, ids(9).__next__)
    assert fence.error is ErrorCode.CONCURRENT_TRANSACTIONS  # the client retries
    assert fence.then is FollowUp.ABORT_FENCED
    fenced = fence.write
    assert fenced is not None and fenced.state is S.PREPARE_EPOCH_FENCE
    assert fenced.producer_epoch == meta.producer_epoch + 1
    # The old session can neither add nor end any more.
    old = (meta.producer_id, meta.producer_epoch)
    assert add_partitions(fenced, *old, [A1], 31).error is ErrorCode.PRODUCER_FENCED
    assert end_transaction(fenced, *old, True, 31, ids().__next__).error is (
        ErrorCode.PRODUCER_FENCED
    )
    # The coordinator aborts with the fenced epoch; the markers carry it.
    abort = end_transaction(
        fenced, fenced.producer_id, fenced.producer_epoch, False, 32, ids().__next__, True
    )
    aborting = written(abort)
    assert aborting.state is S.PREPARE_ABORT and abort.then is FollowUp.WRITE_MARKERS
    assert aborting.producer_epoch == fenced.producer_epoch
    assert aborting.partitions == {A0, B0}
    done = complete(aborting, 33)
    assert done.state is S.COMPLETE_ABORT and done.partitions == frozenset()
    retry = written(init_producer_id(done, "t", 60_000, MAX_TIMEOUT, 34, ids().__next__))
    assert retry.state is S.EMPTY and retry.producer_epoch == fenced.producer_epoch + 1


def test_add_partitions_opens_a_transaction_and_adds_only_what_is_new() -> None:
    meta = ongoing(now=10)
    assert meta.state is S.ONGOING and meta.start_ms == 10
    same = add_partitions(meta, meta.producer_id, meta.producer_epoch, [A0], 15)
    assert same.write is None and same.error is ErrorCode.NONE and same.reply == meta
    more = written(add_partitions(meta, meta.producer_id, meta.producer_epoch, [A1], 15))
    assert more.partitions == {A0, A1, B0} and more.start_ms == 10


@pytest.mark.parametrize(
    ("producer", "error"),
    [
        ((1000, 1), ErrorCode.PRODUCER_FENCED),
        ((999, 0), ErrorCode.INVALID_PRODUCER_ID_MAPPING),
    ],
)
def test_add_partitions_checks_the_producer(producer: tuple[int, int], error: ErrorCode) -> None:
    assert add_partitions(new_producer(), *producer, [A0], 1).error is error
    assert add_partitions(None, *producer, [A0], 1).error is ErrorCode.INVALID_PRODUCER_ID_MAPPING


@pytest.mark.parametrize("commit", [True, False])
def test_end_bumps_the_epoch_and_writes_markers(commit: bool) -> None:
    meta = ongoing()
    decision = end_transaction(meta, meta.producer_id, 0, commit, 20, ids().__next__)
    prepared = written(decision)
    assert prepared.state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    assert decision.then is FollowUp.WRITE_MARKERS
    assert (prepared.producer_epoch, prepared.last_producer_epoch) == (1, 0)
    assert prepared.client_producer == (meta.producer_id, 1)
    done = complete(prepared, 21)
    assert done.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert done.partitions == frozenset() and done.start_ms == -1
    # The next transaction runs with the bumped epoch; the old epoch is fenced.
    assert add_partitions(done, meta.producer_id, 0, [A0], 22).error is ErrorCode.PRODUCER_FENCED
    assert written(add_partitions(done, meta.producer_id, 1, [A0], 22)).state is S.ONGOING


def test_a_retried_end_answers_as_the_first_and_the_other_result_is_refused() -> None:
    meta = ongoing()
    prepared = written(end_transaction(meta, meta.producer_id, 0, True, 20, ids().__next__))
    for current in (prepared, complete(prepared, 21)):
        retry = end_transaction(current, meta.producer_id, 0, True, 22, ids().__next__)
        assert retry.error is ErrorCode.NONE and retry.write is None and retry.reply == current
        other = end_transaction(current, meta.producer_id, 0, False, 22, ids().__next__)
        assert other.error is ErrorCode.INVALID_TXN_STATE


def test_a_late_end_of_the_previous_transaction_cannot_touch_the_next_one() -> None:
    """The torn-transaction case: the EndTxn of transaction 1 arrives (again) while transaction
    2 is open; it must neither commit nor abort transaction 2."""
    first = ended(ongoing(), commit=True)
    second = written(add_partitions(first, first.producer_id, 1, [A1], 30))
    late = end_transaction(second, first.producer_id, 0, True, 31, ids().__next__)
    assert late.error is ErrorCode.PRODUCER_FENCED and late.write is None


def test_commit_with_nothing_open_is_refused_and_abort_only_bumps() -> None:
    meta = new_producer()
    commit = end_transaction(meta, meta.producer_id, 0, True, 5, ids().__next__)
    assert commit.error is ErrorCode.INVALID_TXN_STATE
    abort = end_transaction(meta, meta.producer_id, 0, False, 5, ids().__next__)
    aborting = written(abort)
    assert aborting.partitions == frozenset() and aborting.producer_epoch == 1


def test_end_while_markers_are_written_is_concurrent() -> None:
    meta = ongoing()
    prepared = written(end_transaction(meta, meta.producer_id, 0, True, 20, ids().__next__))
    again = end_transaction(prepared, meta.producer_id, 1, True, 21, ids().__next__)
    assert again.error is ErrorCode.CONCURRENT_TRANSACTIONS
    assert init_producer_id(prepared, "t", 1, MAX_TIMEOUT, 21, ids().__next__).error is (
        ErrorCode.CONCURRENT_TRANSACTIONS
    )


def test_an_exhausted_epoch_rolls_over_to_a_new_id_when_the_transaction_completes() -> None:
    meta = ongoing()
    worn = TransactionMetadata(
        "t", meta.producer_id, MAX_PRODUCER_EPOCH - 1, 60_000, S.ONGOING, frozenset({A0}), 0
    )
    prepared = written(
        end_transaction(worn, worn.producer_id, worn.producer_epoch, True, 5, ids(77).__next__)
    )
    assert prepared.producer_epoch == MAX_PRODUCER_EPOCH and prepared.next_producer_id == 77
    assert prepared.client_producer == (77, 0)
    # Until the markers are written, the new id is told to wait.
    assert add_partitions(prepared, 77, 0, [A0], 6).error is ErrorCode.CONCURRENT_TRANSACTIONS
    done = complete(prepared, 7)
    assert (done.producer_id, done.producer_epoch, done.previous_producer_id) == (
        77,
        0,
        worn.producer_id,
    )
    # A retry of that end with the old id and epoch still answers success.
    retry = end_transaction(done, worn.producer_id, worn.producer_epoch, True, 8, ids().__next__)
    assert retry.error is ErrorCode.NONE and retry.write is None


def test_a_transaction_past_its_timeout_is_fenced_and_aborted() -> None:
    meta = ongoing(now=10)
    assert abort_expired(meta, 10 + meta.timeout_ms) is None
    decision = abort_expired(meta, 11 + meta.timeout_ms)
    assert decision is not None and decision.then is FollowUp.ABORT_FENCED
    assert written(decision).state is S.PREPARE_EPOCH_FENCE
    assert abort_expired(new_producer(), 10**9) is None  # nothing open


def test_an_idle_transactional_id_expires_and_an_open_one_does_not() -> None:
    idle = ended(ongoing(), commit=False)
    assert expire_id(idle, idle.last_update_ms + 1000, 1000) is None
    dead = expire_id(idle, idle.last_update_ms + 1001, 1000)
    assert dead is not None and dead.state is S.DEAD
    assert expire_id(ongoing(), 10**12, 1000) is None
    # A dead id starts over as a new producer.
    reborn = written(init_producer_id(dead, "t", 1000, MAX_TIMEOUT, 0, ids(42).__next__))
    assert (reborn.producer_id, reborn.producer_epoch) == (42, 0)


def test_init_with_an_expected_producer_that_is_not_current_is_fenced() -> None:
    meta = new_producer()
    assert init_producer_id(meta, "t", 1000, MAX_TIMEOUT, 1, ids().__next__, (1000, 5)).error is (
        ErrorCode.PRODUCER_FENCED
    )
    bumped = written(init_producer_id(meta, "t", 1000, MAX_TIMEOUT, 1, ids().__next__, (1000, 0)))
    retry = init_producer_id(bumped, "t", 1000, MAX_TIMEOUT, 2, ids().__next__, (1000, 0))
    assert retry.write is None and retry.reply == bumped
