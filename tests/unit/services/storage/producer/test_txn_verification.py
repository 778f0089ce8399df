"""KIP-890 part 1 decisions at the partition leader: which transactional batch needs the
coordinator's verification, the guard a marker invalidates, and Kafka's produce answers for a
failed verification."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_producer_txns import Leader, data, marker

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.storage.producer.verification import (
    VerificationGuard,
    VerificationNeeded,
    guard_valid,
    produce_error,
)

pytestmark = pytest.mark.timeout(30)

PID = 5


@pytest.fixture
def leader(tmp_path: Path) -> Leader:
    return Leader(tmp_path, ManualClock(1_700_000_000_000))


def test_the_first_transactional_batch_needs_verification_later_ones_do_not(
    leader: Leader,
) -> None:
    assert leader.state.verification_needed(data(PID, 0)) == VerificationNeeded(PID, 0)
    leader.append(data(PID, 0))
    assert leader.state.verification_needed(data(PID, 1)) is None


def test_non_transactional_batches_need_no_verification(leader: Leader) -> None:
    assert leader.state.verification_needed(data(PID, 0, txn=False)) is None


def test_after_the_marker_the_next_batch_needs_verification_again(leader: Leader) -> None:
    leader.append(data(PID, 0))
    leader.append(marker(PID, 0, commit=True))
    assert leader.state.verification_needed(data(PID, 1)) == VerificationNeeded(PID, 0)


def test_an_open_transaction_at_another_epoch_does_not_count(leader: Leader) -> None:
    leader.append(data(PID, 0, epoch=0))
    assert leader.state.verification_needed(data(PID, 0, epoch=1)) == VerificationNeeded(PID, 1)


def test_an_unverified_first_batch_is_refused(leader: Leader) -> None:
    check = leader.state.check_leader_append(data(PID, 0))
    with pytest.raises(RiverlogError) as err:
        leader.state.check_verified(check, None)
    assert err.value.code is ErrorCode.INVALID_TXN_STATE


def test_a_marker_during_the_verification_invalidates_its_guard(leader: Leader) -> None:
    needed = leader.state.verification_needed(data(PID, 0))
    assert needed is not None
    guard = leader.state.verification_guard(needed)
    leader.append(data(PID + 1, 0, txn=False))  # other producers change nothing
    leader.state.check_verified(leader.state.check_leader_append(data(PID, 0)), guard)
    leader.append(marker(PID, 0, commit=False))  # the coordinator aborts meanwhile
    with pytest.raises(RiverlogError) as err:
        leader.state.check_verified(leader.state.check_leader_append(data(PID, 0)), guard)
    assert err.value.code is ErrorCode.INVALID_TXN_STATE


def test_verifications_of_one_producer_share_the_guard_until_the_transaction_opens(
    leader: Leader,
) -> None:
    needed = VerificationNeeded(PID, 0)
    guard = leader.state.verification_guard(needed)
    assert leader.state.verification_guard(needed) is guard
    leader.append(data(PID, 0))  # verified and appended: the transaction is open
    assert leader.state.verification_guard(needed) is not guard


def test_guard_valid_needs_the_current_guard_of_the_same_epoch() -> None:
    needed = VerificationNeeded(PID, 3)
    guard = VerificationGuard(PID, 3)
    assert guard_valid(None, None, None)
    assert guard_valid(needed, guard, guard)
    assert not guard_valid(needed, None, guard)
    assert not guard_valid(needed, guard, VerificationGuard(PID, 3))
    assert not guard_valid(VerificationNeeded(PID, 4), guard, guard)


@pytest.mark.parametrize(
    ("coordinator", "produce"),
    [
        (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.NOT_ENOUGH_REPLICAS),
        (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH),
        (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_PRODUCER_EPOCH),
        (ErrorCode.INVALID_TXN_STATE, ErrorCode.INVALID_TXN_STATE),
        (ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
    ],
)
def test_produce_error_follows_kafka(coordinator: ErrorCode, produce: ErrorCode) -> None:
    assert produce_error(coordinator) is produce
