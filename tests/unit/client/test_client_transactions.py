"""The transactional producer's decisions (txn_decisions.py) and its TransactionManager against
an in-process coordinator double that answers from a script: partitions are added once before
their first drain, retriable answers are retried inside the call, a timeout leaves the call to
be made again, fatal and abortable errors land in the right state, and every end hands the
idempotence manager the next epoch."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import pytest

from riverlog.client import ClientTimeoutError
from riverlog.client.config import ProducerConfig
from riverlog.client.consumer.group.api import ConsumerGroupMetadata
from riverlog.client.producer.batch import ProducerBatch
from riverlog.client.producer.idempotence import IdempotenceManager
from riverlog.client.producer.transaction_manager import TransactionManager
from riverlog.client.producer.transaction_state import (
    AbortableTransactionError,
    FatalTransactionError,
    TransactionStateError,
    TxnState,
)
from riverlog.client.producer.txn_decisions import (
    DrainAction,
    Outcome,
    backoff_s,
    batch_failure,
    by_topic,
    deciding_error,
    drain_action,
    offsets_by_topic,
    outcome_of,
    partitions_to_add,
)
from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.records.header import parse_header
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2, transactions_pb2

E = ErrorCode
S = TxnState


# ---- pure decisions --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (E.CONCURRENT_TRANSACTIONS, Outcome.RETRY),
        (E.COORDINATOR_LOAD_IN_PROGRESS, Outcome.RETRY),
        (E.NOT_COORDINATOR, Outcome.RETRY),
        (E.COORDINATOR_NOT_AVAILABLE, Outcome.RETRY),
        (E.PRODUCER_FENCED, Outcome.FAIL),
        (E.INVALID_TXN_STATE, Outcome.FAIL),
        (E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, Outcome.FAIL),
    ],
)
def test_coordinator_answers_are_retried_or_failed_as_kafka(code: E, outcome: Outcome) -> None:
    assert outcome_of(error_for(code)) is outcome
    assert outcome_of(None) is Outcome.DONE


def test_a_per_partition_answer_is_decided_by_its_worst_error() -> None:
    loading, illegal = error_for(E.COORDINATOR_LOAD_IN_PROGRESS), error_for(E.ILLEGAL_GENERATION)
    assert deciding_error([]) is None
    assert deciding_error([loading]) is loading
    assert deciding_error([loading, illegal]) is illegal


def test_backoff_doubles_up_to_the_maximum() -> None:
    assert [backoff_s(n, 100, 1000) for n in (1, 2, 3, 4, 5, 60)] == [
        0.1, 0.2, 0.4, 0.8, 1.0, 1.0
    ]  # fmt: skip


def test_only_new_partitions_with_waiting_batches_are_added_in_order() -> None:
    queued = [("b", 1), ("a", 2), ("a", 0), ("b", 0)]
    assert partitions_to_add(queued, {("b", 0)}) == [("a", 0), ("a", 2), ("b", 1)]
    assert partitions_to_add(queued, set(queued)) == []
    assert by_topic([("b", 1), ("a", 2), ("a", 0)]) == {"a": [0, 2], "b": [1]}


@pytest.mark.parametrize(
    ("state", "action"),
    [
        (S.UNINITIALIZED, DrainAction.HOLD),
        (S.READY, DrainAction.HOLD),
        (S.IN_TRANSACTION, DrainAction.SEND),
        (S.COMMITTING_TRANSACTION, DrainAction.SEND),
        (S.ABORTING_TRANSACTION, DrainAction.DROP),
        (S.ABORTABLE_ERROR, DrainAction.DROP),
        (S.FATAL_ERROR, DrainAction.DROP),
    ],
)
def test_the_sender_sends_holds_or_drops_by_state(state: TxnState, action: DrainAction) -> None:
    assert drain_action(state) is action


def test_a_failed_batch_is_abortable_fenced_or_ignored_while_aborting() -> None:
    too_large = error_for(E.MESSAGE_TOO_LARGE)
    assert batch_failure(S.IN_TRANSACTION, too_large) is too_large
    assert batch_failure(S.ABORTING_TRANSACTION, too_large) is None
    fenced = batch_failure(S.IN_TRANSACTION, error_for(E.INVALID_PRODUCER_EPOCH))
    assert isinstance(fenced, FatalTransactionError) and fenced.code == E.PRODUCER_FENCED


def test_offsets_are_grouped_by_topic_and_negative_ones_refused() -> None:
    rows = offsets_by_topic(
        {TopicPartition("t", 1): (7, "m", 3), TopicPartition("t", 0): (5, "", -1)}
    )
    assert rows == {"t": [(0, 5, "", -1), (1, 7, "m", 3)]}
    with pytest.raises(ValueError, match="negative offset"):
        offsets_by_topic({TopicPartition("t", 0): (-1, "", -1)})


# ---- the manager against a scripted coordinator ------------------------------------------------


class ScriptedGateway:
    """Answers each transaction call from a queue of error codes (NONE once empty) and keeps
    the requests. EndTxn answers the next epoch, as KIP-890's coordinator does."""

    def __init__(self) -> None:
        self.script: dict[str, deque[E]] = {}
        self.requests: list[tuple[str, Any]] = []
        self.partition_codes: deque[E] = deque()  # TxnOffsetCommit's per-partition answers
        self.epoch = 4

    def answer(self, method: str, *codes: E) -> None:
        self.script.setdefault(method, deque()).extend(codes)

    def call(self, method: Callable[[Any], Any], request: Any, timeout_s: float) -> Any:
        name = method(_Names())
        self.requests.append((name, request))
        codes = self.script.get(name)
        code = codes.popleft() if codes else E.NONE
        if name == "InitProducerId":
            return transactions_pb2.InitProducerIdResponse(
                error_code=code, producer_id=42, producer_epoch=self.epoch
            )
        if name == "EndTxn" and code == E.NONE:
            self.epoch += 1
            return transactions_pb2.EndTxnResponse(producer_id=42, producer_epoch=self.epoch)
        if name == "TxnOffsetCommit":
            part = self.partition_codes.popleft() if self.partition_codes else E.NONE
            return coordinator_pb2.TxnOffsetCommitResponse(
                error_code=code,
                topics=[
                    coordinator_pb2.OffsetCommitTopicResponse(
                        name=t.name,
                        partitions=[
                            coordinator_pb2.OffsetCommitPartitionResponse(
                                partition=p.partition, error_code=part
                            )
                            for p in t.partitions
                        ],
                    )
                    for t in request.topics
                ],
            )
        response_type = getattr(transactions_pb2, f"{name}Response")
        return response_type(error_code=code)

    def names(self) -> list[str]:
        return [name for name, _ in self.requests]


class _Names:
    def __getattr__(self, name: str) -> str:
        return name


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def manager(
    gateway: ScriptedGateway, clock: Clock
) -> tuple[TransactionManager, IdempotenceManager]:
    config = ProducerConfig.from_kafka(bootstrap_servers="127.0.0.1:1", transactional_id="tx")
    idem = IdempotenceManager(on_bump=lambda why: None)
    txn = TransactionManager(
        config,
        gateway,
        idem,
        wakeup=lambda: None,
        clock=clock,
        sleep=clock.sleep,  # type: ignore[arg-type]
    )
    return txn, idem


def ready(gateway: ScriptedGateway, clock: Clock) -> tuple[TransactionManager, IdempotenceManager]:
    txn, idem = manager(gateway, clock)
    txn.init_transactions(30)
    idem.before_drain()  # the sender applies the new producer id
    return txn, idem


def test_init_retries_while_the_coordinator_aborts_the_old_session() -> None:
    gateway, clock = ScriptedGateway(), Clock()
    gateway.answer("InitProducerId", E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS)
    txn, idem = manager(gateway, clock)
    txn.init_transactions(30)
    assert gateway.names() == ["InitProducerId"] * 3 and clock.now > 100.0
    request = gateway.requests[0][1]
    assert (request.transactional_id, request.transaction_timeout_ms) == ("tx", 60_000)
    assert txn.state is S.READY
    idem.before_drain()
    assert (idem.producer_id_and_epoch.producer_id, idem.producer_id_and_epoch.epoch) == (42, 4)


def test_a_timeout_leaves_the_call_to_be_made_again() -> None:
    gateway, clock = ScriptedGateway(), Clock()
    gateway.answer("InitProducerId", *[E.CONCURRENT_TRANSACTIONS] * 100)
    txn, _ = manager(gateway, clock)
    with pytest.raises(ClientTimeoutError, match="InitProducerId"):
        txn.init_transactions(2)
    assert txn.state is S.INITIALIZING
    gateway.script.clear()
    txn.init_transactions(2)
    assert txn.state is S.READY


def test_partitions_are_added_once_before_their_first_drain() -> None:
    gateway, clock = ScriptedGateway(), Clock()
    txn, _ = ready(gateway, clock)
    assert txn.before_drain([("t", 0)], clock()) == (DrainAction.HOLD, set())  # not begun
    queued = [("t", 1), ("t", 0)]
    txn.begin_transaction()
    gateway.answer("AddPartitionsToTxn", E.CONCURRENT_TRANSACTIONS)
    assert txn.before_drain(queued, clock()) == (DrainAction.SEND, set())  # retry after a pause
    assert txn.before_drain(queued, clock()) == (DrainAction.SEND, set())  # still pausing
    clock.now += 1
    assert txn.before_drain(queued, clock()) == (DrainAction.SEND, set(queued))
    both = {("t", 0), ("t", 1), ("u", 0)}
    assert txn.before_drain([("t", 0), ("u", 0)], clock()) == (DrainAction.SEND, both)
    adds = [r for name, r in gateway.requests if name == "AddPartitionsToTxn"]
    assert [[(t.name, list(t.partitions)) for t in r.topics] for r in adds] == [
        [("t", [0, 1])], [("t", [0, 1])], [("u", [0])]
    ]  # fmt: skip
    assert {(r.producer_id, r.producer_epoch) for r in adds} == {(42, 4)}


def test_a_fenced_add_is_fatal_and_the_queued_batches_are_dropped() -> None:
    gateway, clock = ScriptedGateway(), Clock()
    txn, _ = ready(gateway, clock)
    txn.begin_transaction()
    gateway.answer("AddPartitionsToTxn", E.PRODUCER_FENCED)
    txn.before_drain([("t", 0)], clock())
    assert txn.state is S.FATAL_ERROR
    assert txn.before_drain([("t", 0)], clock())[0] is DrainAction.DROP
    error = txn.dropped_batch_error()
    assert isinstance(error, FatalTransactionError) and error.code == E.PRODUCER_FENCED
    with pytest.raises(FatalTransactionError):
        txn.commit_transaction(lambda timeout: None, 10)
    with pytest.raises(FatalTransactionError):
        txn.abort_transaction(lambda: False, 10)


def test_commit_flushes_then_ends_and_takes_the_next_epoch() -> None:
    gateway, clock = ScriptedGateway(), Clock()
    txn, idem = ready(gateway, clock)
    txn.begin_transaction()
    txn.before_drain([("t", 0)], clock())
    batch = ProducerBatch("t", 0, 0.0)
    batch.append((1, None, b"v", None))
    idem.assign(batch)
    assert batch.base_sequence == 0
    flushed: list[float] = []
    gateway.answer("EndTxn", E.CONCURRENT_TRANSACTIONS)
    txn.commit_transaction(flushed.append, 10)
    assert flushed and txn.state is S.READY
    ends = [r for name, r in gateway.requests if name == "EndTxn"]
    assert [(r.committed, r.producer_epoch) for r in ends] == [(True, 4), (True, 4)]
    idem.before_drain()
    assert idem.producer_id_and_epoch.epoch == 5
    txn.begin_transaction()
    txn.before_drain([("t", 0)], clock())  # added again: a new transaction
    second = ProducerBatch("t", 0, 0.0)
    second.append((1, None, b"v", None))
    idem.assign(second)
    assert (second.producer_epoch, second.base_sequence) == (5, 0)  # sequences restart
    second.transactional = True
    assert parse_header(second.build()).is_transactional


def test_ending_a_transaction_the_coordinator_never_heard_of_sends_nothing() -> None:
    gateway, clock = ScriptedGateway(), Clock()
    txn, _ = ready(gateway, clock)
    txn.begin_transaction()
    txn.commit_transaction(lambda timeout: None, 10)
    txn.begin_transaction()
    txn.abort_transaction(lambda: False, 10)
    assert gateway.names() == ["InitProducerId"] and txn.state is S.READY


def test_a_failed_batch_makes_commit_impossible_until_abort() -> None:
    gateway, clock = ScriptedGateway(), Clock()
    txn, _ = ready(gateway, clock)
    txn.begin_transaction()
    txn.before_drain([("t", 0)], clock())
    txn.on_batch_failed(error_for(E.MESSAGE_TOO_LARGE))
    assert txn.state is S.ABORTABLE_ERROR
    with pytest.raises(AbortableTransactionError, match="must be aborted"):
        txn.check_can_send()
    with pytest.raises(AbortableTransactionError):
        txn.commit_transaction(lambda timeout: None, 10)
    waits = iter([True, True, False])
    txn.abort_transaction(lambda: next(waits), 10)  # waits for the batches on the wire
    ends = [r for name, r in gateway.requests if name == "EndTxn"]
    assert [r.committed for r in ends] == [False] and txn.state is S.READY


def test_a_batch_failing_in_commit_fails_the_commit() -> None:
    gateway, clock = ScriptedGateway(), Clock()
    txn, _ = ready(gateway, clock)
    txn.begin_transaction()
    txn.before_drain([("t", 0)], clock())

    def flush(timeout: float) -> None:
        txn.on_batch_failed(error_for(E.NOT_ENOUGH_REPLICAS))

    with pytest.raises(AbortableTransactionError):
        txn.commit_transaction(flush, 10)
    assert "EndTxn" not in gateway.names()


def test_offsets_go_to_the_transaction_then_to_the_group() -> None:
    gateway, clock = ScriptedGateway(), Clock()
    txn, _ = ready(gateway, clock)
    with pytest.raises(TransactionStateError):
        txn.send_offsets_to_transaction({TopicPartition("t", 0): 3}, "g", 10)
    txn.begin_transaction()
    gateway.answer("TxnOffsetCommit", E.NOT_COORDINATOR)
    gateway.partition_codes.extend([E.NONE, E.COORDINATOR_LOAD_IN_PROGRESS])
    metadata = ConsumerGroupMetadata("g", 7, "member-1", "static-1")
    txn.send_offsets_to_transaction({TopicPartition("t", 0): 3}, metadata, 10)
    assert gateway.names()[1:] == ["AddOffsetsToTxn"] + ["TxnOffsetCommit"] * 3
    commit = gateway.requests[-1][1]
    assert (commit.group_id, commit.generation_id, commit.member_id) == ("g", 7, "member-1")
    assert commit.group_instance_id == "static-1" and commit.producer_epoch == 4
    assert [(p.partition, p.committed_offset) for p in commit.topics[0].partitions] == [(0, 3)]
    gateway.partition_codes.append(E.ILLEGAL_GENERATION)
    with pytest.raises(AbortableTransactionError, match="t-0"):
        txn.send_offsets_to_transaction({TopicPartition("t", 0): 4}, metadata, 10)
    assert txn.state is S.ABORTABLE_ERROR


def test_an_end_refused_as_fenced_is_fatal() -> None:
    gateway, clock = ScriptedGateway(), Clock()
    txn, _ = ready(gateway, clock)
    txn.begin_transaction()
    txn.before_drain([("t", 0)], clock())
    gateway.answer("EndTxn", E.PRODUCER_FENCED)
    with pytest.raises(FatalTransactionError) as fenced:
        txn.commit_transaction(lambda timeout: None, 10)
    assert fenced.value.code == E.PRODUCER_FENCED and txn.state is S.FATAL_ERROR
    with pytest.raises(FatalTransactionError):
        txn.begin_transaction()
    assert isinstance(fenced.value, RiverlogError)


def test_concurrent_transactions_is_retried_from_20_ms_as_kafka() -> None:
    from riverlog.client.producer.txn_decisions import backoff_s

    busy = RiverlogError("markers being written", ErrorCode.CONCURRENT_TRANSACTIONS)
    other = RiverlogError("loading", ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert backoff_s(1, 100, 1000, busy) == 0.02
    assert backoff_s(3, 100, 1000, busy) == 0.08
    assert backoff_s(1, 100, 1000, other) == 0.1
    assert backoff_s(1, 10, 1000, busy) == 0.01  # a smaller retry.backoff.ms stays


def test_a_leaders_invalid_txn_state_is_abortable_and_a_fence_fatal() -> None:
    from riverlog.client.producer.transaction_state import (
        AbortableTransactionError,
        FatalTransactionError,
        TxnState,
    )
    from riverlog.client.producer.txn_decisions import batch_failure

    verification = RiverlogError("not in the transaction", ErrorCode.INVALID_TXN_STATE)
    seen = batch_failure(TxnState.IN_TRANSACTION, verification)
    assert isinstance(seen, AbortableTransactionError) and seen.code == ErrorCode.INVALID_TXN_STATE
    fenced = batch_failure(
        TxnState.IN_TRANSACTION, RiverlogError("old epoch", ErrorCode.INVALID_PRODUCER_EPOCH)
    )
    assert isinstance(fenced, FatalTransactionError)
    assert batch_failure(TxnState.ABORTING_TRANSACTION, verification) is None
