"""The transactional producer's calls to the transaction coordinator, through the gateway
(Kafka's client TransactionManager, KIP-98, with KIP-890's epoch bump on every EndTxn).

The application thread makes the calls that end in a coordinator answer: InitProducerId,
AddOffsetsToTxn and TxnOffsetCommit, EndTxn; each is retried with back-off inside the call
while the answer is retriable (CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS,
NOT_COORDINATOR, a lost connection) until its deadline, which leaves the state as it was so the
call may be made again (Kafka's TimeoutException). The sender thread adds partitions: before it
drains the first batch of a partition it sends AddPartitionsToTxn for every new partition with
waiting batches (`before_drain`). The state machine (`transaction_state.py`) says which call is
allowed when; the pure decisions are in `txn_decisions.py`.

The producer id and epoch live in the idempotence manager (the sender stamps batches with them):
InitProducerId and every EndTxn answer hand it a new epoch (KIP-890) and it starts every
partition's sequences again at 0, applied on the sender thread before its next drain. The sender
holds `drain_lock` from its decision to its send, and an end takes it to reset, so a batch of
the next transaction never leaves with the previous epoch or before its partition is added.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2, transactions_pb2

from .._connection import GatewayConnection, rpc_error
from ..config import ProducerConfig
from ..consumer.group.api import ConsumerGroupMetadata, OffsetAndMetadata
from ..errors import ClientTimeoutError
from .idempotence import IdempotenceManager, ProducerIdAndEpoch
from .transaction_state import (
    AbortableTransactionError,
    FatalTransactionError,
    TxnState,
    TxnStateMachine,
)
from .txn_decisions import (
    DrainAction,
    Outcome,
    TopicPartitionKey,
    backoff_s,
    batch_failure,
    by_topic,
    deciding_error,
    drain_action,
    fenced_or_same,
    offsets_by_topic,
    outcome_of,
    partitions_to_add,
)

log = logging.getLogger(__name__)
_S = TxnState


class TransactionManager:
    """Thread-safe: the application thread calls the public transaction methods (one at a
    time, as Kafka's), the sender thread `before_drain` and `on_batch_failed`."""

    def __init__(
        self,
        config: ProducerConfig,
        conn: GatewayConnection,
        idempotence: IdempotenceManager,
        wakeup: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.transactional_id = config.transactional_id
        self._config = config
        self._conn = conn
        self._idem = idempotence
        self._wakeup = wakeup
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self.drain_lock = threading.Lock()
        self._sm = TxnStateMachine()
        self._pid = ProducerIdAndEpoch()
        self._added: set[TopicPartitionKey] = set()
        self._started = False  # the coordinator may know of this transaction (ended by EndTxn)
        self._next_add_at = 0.0
        self._add_attempts = 0
        self._request_timeout_s = config.request_timeout_ms / 1000

    # ---- state seen from outside ---------------------------------------------------------

    @property
    def state(self) -> TxnState:
        return self._sm.state

    @property
    def producer_id_and_epoch(self) -> ProducerIdAndEpoch:
        with self._lock:
            return self._pid

    def check_can_send(self) -> None:
        """`send` is allowed only inside a transaction (else the state's error)."""
        sm = self._sm
        if sm.state is not _S.IN_TRANSACTION:
            with self._lock:
                sm.require(_S.IN_TRANSACTION, action="send outside a transaction")

    # ---- the application's calls ---------------------------------------------------------

    def init_transactions(self, timeout_s: float) -> None:
        """InitProducerId with the transactional id: fences an older session with the same
        id and aborts what it left open (retried while the coordinator does that)."""
        with self._lock:
            self._sm.require(_S.UNINITIALIZED, _S.INITIALIZING, action="init_transactions")
            if self._sm.state is _S.UNINITIALIZED:
                self._sm.transition_to(_S.INITIALIZING)
        request = transactions_pb2.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self._config.transaction_timeout_ms,
        )
        response = self._call("InitProducerId", request, self._clock() + timeout_s)
        self._new_epoch(response.producer_id, response.producer_epoch, _S.READY)
        log.info(
            "transactional id %r: producer id %d, epoch %d",
            self.transactional_id,
            response.producer_id,
            response.producer_epoch,
        )

    def begin_transaction(self) -> None:
        with self._lock:
            self._sm.require(_S.READY, action="begin_transaction")
            self._sm.transition_to(_S.IN_TRANSACTION)

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
        group: ConsumerGroupMetadata | str,
        timeout_s: float,
    ) -> None:
        """AddOffsetsToTxn (the group's __consumer_offsets partition joins the transaction),
        then TxnOffsetCommit to the group's coordinator: the offsets commit or abort with the
        transaction. A ConsumerGroupMetadata lets the group coordinator fence a consumer
        that left the generation (KIP-447); a bare group id is not checked."""
        metadata = (
            group if isinstance(group, ConsumerGroupMetadata)
            else ConsumerGroupMetadata(group, -1, "", None)
        )  # fmt: skip
        if not metadata.group_id:
            raise ValueError("send_offsets_to_transaction needs a group id")
        rows = offsets_by_topic(
            {
                tp: (om, "", -1)
                if isinstance(om, int)
                else (om.offset, om.metadata, om.leader_epoch)
                for tp, om in offsets.items()
            }
        )
        with self._lock:
            self._sm.require(_S.IN_TRANSACTION, action="send_offsets_to_transaction")
            pid = self._pid
            self._started = True
        deadline = self._clock() + timeout_s
        self._call(
            "AddOffsetsToTxn",
            transactions_pb2.AddOffsetsToTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=pid.producer_id,
                producer_epoch=pid.epoch,
                group_id=metadata.group_id,
            ),
            deadline,
        )
        request = coordinator_pb2.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id,
            group_id=metadata.group_id,
            producer_id=pid.producer_id,
            producer_epoch=pid.epoch,
            generation_id=metadata.generation_id,
            member_id=metadata.member_id,
            topics=[
                coordinator_pb2.OffsetCommitTopic(
                    name=topic,
                    partitions=[
                        coordinator_pb2.OffsetCommitPartition(
                            partition=p, committed_offset=o, metadata=m, committed_leader_epoch=e
                        )
                        for p, o, m, e in parts
                    ],
                )
                for topic, parts in rows.items()
            ],
        )
        if metadata.group_instance_id is not None:
            request.group_instance_id = metadata.group_instance_id
        # A partition's retriable answer sends the request again; any other fails the call,
        # and the transaction must abort (Kafka's TxnOffsetCommitHandler).
        self._call("TxnOffsetCommit", request, deadline, _offsets_answer_error)

    def commit_transaction(self, flush: Callable[[float], None], timeout_s: float) -> None:
        """Flush every record of the transaction, then EndTxn(commit). A timeout leaves the
        commit pending: call again to finish it."""
        with self._lock:
            self._sm.require(_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, action="commit")
            if self._sm.state is _S.IN_TRANSACTION:
                self._sm.transition_to(_S.COMMITTING_TRANSACTION)
        deadline = self._clock() + timeout_s
        flush(max(deadline - self._clock(), 0.0))
        with self._lock:  # a batch failed: the transaction cannot commit
            self._sm.require(_S.COMMITTING_TRANSACTION, action="commit")
            started = self._started
        self._end(True, started, deadline)

    def abort_transaction(self, in_flight: Callable[[], bool], timeout_s: float) -> None:
        """Drop the batches not sent yet (their futures fail), wait for the ones on the wire,
        then EndTxn(abort). Allowed after an abortable error; a timeout leaves the abort
        pending: call again to finish it."""
        with self._lock:
            self._sm.require(
                _S.IN_TRANSACTION, _S.ABORTABLE_ERROR, _S.ABORTING_TRANSACTION, action="abort"
            )
            if self._sm.state is not _S.ABORTING_TRANSACTION:
                self._sm.transition_to(_S.ABORTING_TRANSACTION)
            started = self._started
        self._wakeup()  # the sender drops what is queued
        deadline = self._clock() + timeout_s
        while in_flight():
            if self._clock() >= deadline:
                raise ClientTimeoutError(
                    f"abort_transaction: batches still in flight after {timeout_s} s"
                )
            self._sleep(0.005)
        self._end(False, started, deadline)

    def _end(self, commit: bool, started: bool, deadline: float) -> None:
        """EndTxn, and the next transaction's epoch; nothing to end if the coordinator never
        heard of this transaction (no partition or offsets added: Kafka sends no EndTxn)."""
        with self._lock:
            pid = self._pid
        if not started:
            self._new_epoch(pid.producer_id, pid.epoch, _S.READY)
            return
        response = self._call(
            "EndTxn",
            transactions_pb2.EndTxnRequest(
                transactional_id=self.transactional_id,
                producer_id=pid.producer_id,
                producer_epoch=pid.epoch,
                committed=commit,
            ),
            deadline,
        )
        self._new_epoch(response.producer_id, response.producer_epoch, _S.READY)

    def _new_epoch(self, producer_id: int, epoch: int, state: TxnState) -> None:
        """The id and epoch of the next transaction: sequences restart at 0 on the sender
        thread before it drains again; nothing is in the transaction."""
        with self.drain_lock, self._lock:
            if (producer_id, epoch) != (self._pid.producer_id, self._pid.epoch):
                self._pid = ProducerIdAndEpoch(producer_id, epoch)
                self._idem.reset_producer_id(producer_id, epoch)
            self._added.clear()
            self._started = False
            self._add_attempts = 0
            self._next_add_at = 0.0
            self._sm.transition_to(state)

    # ---- the sender thread ---------------------------------------------------------------

    def before_drain(
        self, queued: Collection[TopicPartitionKey], now: float
    ) -> tuple[DrainAction, frozenset[TopicPartitionKey]]:
        """Sender thread, holding `drain_lock`: what to do with the queued batches and the
        partitions in the transaction (the only ones it may drain). Adds the new partitions
        of `queued` first (one AddPartitionsToTxn, a blocking call: only the first batch of a
        partition in a transaction waits for it)."""
        with self._lock:
            action = drain_action(self._sm.state)
            if action is not DrainAction.SEND or not self._pid.is_valid:
                held = DrainAction.HOLD if action is DrainAction.SEND else action
                return held, frozenset()
            new = partitions_to_add(queued, self._added)
            pid = self._pid
        if new and now >= self._next_add_at:
            self._add_partitions(new, pid, now)
        with self._lock:
            return DrainAction.SEND, frozenset(self._added)

    def _add_partitions(
        self, new: list[TopicPartitionKey], pid: ProducerIdAndEpoch, now: float
    ) -> None:
        request = transactions_pb2.AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=pid.producer_id,
            producer_epoch=pid.epoch,
            topics=[
                transactions_pb2.TxnTopic(name=topic, partitions=parts)
                for topic, parts in by_topic(new).items()
            ],
        )
        with self._lock:
            self._started = True  # even unanswered: the coordinator may have it
        try:
            response = self._conn.call(
                lambda s: s.AddPartitionsToTxn, request, self._request_timeout_s
            )
            error = _answer_error(response)
        except Exception as e:
            error = rpc_error(e)
        outcome = outcome_of(error)
        if outcome is Outcome.DONE:
            with self._lock:
                self._added.update(new)
                self._add_attempts = 0
            log.debug("added %s to transaction %r", new, self.transactional_id)
        elif outcome is Outcome.RETRY:
            assert error is not None
            self._add_attempts += 1
            pause = backoff_s(
                self._add_attempts,
                self._config.retry_backoff_ms,
                self._config.retry_backoff_max_ms,
                error,
            )
            self._next_add_at = now + pause * random.uniform(0.8, 1.2)
            log.info("AddPartitionsToTxn %s: %s; retrying", new, error)
        else:
            assert error is not None
            self._fail(error)

    def dropped_batch_error(self) -> RiverlogError:
        """The error of a batch dropped unsent: the transaction's error, or Kafka's
        TransactionAbortedException when the application aborts."""
        with self._lock:
            if self._sm.error is not None:
                return self._sm.error
        return AbortableTransactionError(
            "failing the batch: the transaction was aborted", ErrorCode.TRANSACTION_ABORTABLE
        )

    def on_batch_failed(self, error: BaseException) -> None:
        """Sender thread: a batch failed for good; the transaction cannot commit (abortable),
        or the producer is fenced (fatal)."""
        with self._lock:
            seen = batch_failure(self._sm.state, rpc_error(error))
            if seen is None:
                return
            if self._sm.state is _S.ABORTABLE_ERROR and not isinstance(seen, FatalTransactionError):
                return  # the first error says why the transaction must abort
            self._sm.fail(seen)

    def on_sequence_trouble(self, why: str) -> None:
        """Sender thread: the idempotent bookkeeping needs a new epoch. A transactional
        producer never bumps it alone: the transaction aborts, and its EndTxn brings one."""
        self.on_batch_failed(
            AbortableTransactionError(
                f"{why}: the transaction must be aborted", ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            )
        )

    # ---- calling the coordinator ---------------------------------------------------------

    def _call(
        self,
        method: str,
        request: Any,
        deadline: float,
        answer_error: Callable[[Any], RiverlogError | None] | None = None,
    ) -> Any:
        """`method` until an answer that is not retriable or the deadline; raises the
        state machine's error (fatal or abortable) for a failing answer, ClientTimeoutError
        (state unchanged) when the deadline passes."""
        attempt = 0
        while True:
            remaining = deadline - self._clock()
            error: RiverlogError | None
            try:
                response = self._conn.call(
                    lambda s: getattr(s, method),
                    request,
                    max(min(self._request_timeout_s, remaining), 0.001),
                )
                error = (answer_error or _answer_error)(response)
            except Exception as e:
                response, error = None, rpc_error(e)
            outcome = outcome_of(error)
            if outcome is Outcome.DONE:
                return response
            assert error is not None
            if outcome is Outcome.FAIL:
                raise self._fail(error)
            attempt += 1
            pause = backoff_s(
                attempt, self._config.retry_backoff_ms, self._config.retry_backoff_max_ms, error
            )
            pause *= random.uniform(0.8, 1.2)
            if self._clock() + pause >= deadline:
                raise ClientTimeoutError(
                    f"{method} of transactional id {self.transactional_id!r} did not complete "
                    f"in time (last answer: {error})"
                )
            log.debug("%s: %s; retrying in %.3f s", method, error, pause)
            self._sleep(pause)

    def _fail(self, error: RiverlogError) -> RiverlogError:
        with self._lock:
            if self._sm.state is _S.FATAL_ERROR and self._sm.error is not None:
                return self._sm.error
            return self._sm.fail(fenced_or_same(error))


def _answer_error(response: Any) -> RiverlogError | None:
    code = int(response.error_code)
    return None if code == ErrorCode.NONE else error_for(code, response.error_message)


def _offsets_answer_error(response: Any) -> RiverlogError | None:
    """TxnOffsetCommit's answer: the whole request's error, else its partitions' (the one
    that decides: a failing one before a retriable one)."""
    whole = _answer_error(response)
    if whole is not None:
        return whole
    return deciding_error(
        error_for(p.error_code, f"{t.name}-{p.partition}: {p.error_message}")
        for t in response.topics
        for p in t.partitions
        if p.error_code != ErrorCode.NONE
    )
