"""Transactions for `AdminClient` (Kafka's Admin listTransactions and describeTransactions,
KIP-664, and fenceProducers, KIP-618) and the operator's abort of a hanging transaction, over
the gateway's transaction RPCs.
`TransactionAdminMixin` needs only the admin client's `_call`. Thread-safe, as the admin
client."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.types import TopicPartition
from riverlog.v1 import coordinator_pb2, transactions_pb2


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str  # Kafka's names: Empty, Ongoing, PrepareCommit, ...


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True, slots=True)
class FencedProducer:
    """A transactional id after `fence_producers`: its producer id and the epoch that fenced
    every older session."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """What `abort_transaction` found and left: the state the id was in (Ongoing: it was
    aborted; anything else: nothing was open, nothing changed) and its producer id and epoch
    now (bumped when it aborted)."""

    transactional_id: str
    previous_state: str
    producer_id: int
    producer_epoch: int


_FENCE_RETRIABLE = frozenset(
    {
        ErrorCode.CONCURRENT_TRANSACTIONS,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
    }
)


class TransactionAdminMixin:
    """Mixed into AdminClient, which provides `_call` and `config`."""

    _call: Callable[[Callable[[Any], Any], Any], Any]
    config: Any

    def abort_transaction(self, transactional_id: str) -> AbortedTransaction:
        """An operator's abort of a hanging transaction (the coordinator's AbortTransaction,
        decision 0031): an Ongoing one is fenced and aborted as transaction.timeout.ms would
        (the producer that held it gets PRODUCER_FENCED on its next call); one already ending
        is waited for (CONCURRENT_TRANSACTIONS, retried up to default.api.timeout.ms); with
        nothing open nothing changes. Raises TRANSACTIONAL_ID_NOT_FOUND for an unknown id.
        (Kafka's Admin.abortTransaction writes a marker to one partition instead; here the
        coordinator knows every partition of the transaction.)"""
        request = coordinator_pb2.AbortTransactionRequest(transactional_id=transactional_id)
        response = self._retrying(lambda: self._call(lambda s: s.AbortTransaction, request))
        if isinstance(response, RiverlogError):
            raise response
        return AbortedTransaction(
            transactional_id, response.previous_state, response.producer_id, response.producer_epoch
        )

    def complete_transaction(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> None:
        """EndTxn for a transaction another process left open, by its id, producer id and
        epoch (the prepared half of a two-phase commit, as KIP-939 does for Kafka): used by
        the Spark sink's driver to commit the transactions its tasks wrote. Retried while the
        coordinator is busy (up to default.api.timeout.ms); raises its error otherwise (e.g.
        PRODUCER_FENCED when the transaction timed out or was fenced)."""
        request = transactions_pb2.EndTxnRequest(
            transactional_id=transactional_id,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            committed=commit,
        )
        response = self._retrying(lambda: self._call(lambda s: s.EndTxn, request))
        if isinstance(response, RiverlogError):
            raise response

    def _retrying(self, call: Callable[[], Any]) -> Any:
        """`call()` while its answer is a retriable coordinator error, up to
        default.api.timeout.ms: the answer, or the last error."""
        config = self.config
        deadline = time.monotonic() + config.default_api_timeout_ms / 1000
        attempt = 0
        while True:
            response = call()
            code = int(response.error_code)
            if code == ErrorCode.NONE:
                return response
            error = error_for(code, response.error_message)
            if code not in _FENCE_RETRIABLE or time.monotonic() >= deadline:
                return error
            attempt += 1
            pause = min(
                config.retry_backoff_ms * 2 ** min(attempt, 16), config.retry_backoff_max_ms
            )
            time.sleep(min(pause / 1000, max(deadline - time.monotonic(), 0.0)))

    def fence_producers(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, FencedProducer | RiverlogError]:
        """Kafka's Admin.fenceProducers (KIP-618): InitProducerId for each id, as a new
        producer with that transactional.id would, so the coordinator bumps its epoch (the
        producer that holds it is fenced: PRODUCER_FENCED on its next call) and ends what it
        left open: an ongoing transaction is aborted, one already prepared completes. Retried
        while the coordinator is still ending it (CONCURRENT_TRANSACTIONS), up to
        default.api.timeout.ms. Each id's result, or its error."""
        out: dict[str, FencedProducer | RiverlogError] = {}
        for tid in transactional_ids:
            out[tid] = self._fence(tid)
        return out

    def _fence(self, tid: str) -> FencedProducer | RiverlogError:
        # Kafka's FenceProducersHandler asks for a 1 ms timeout: no transaction is begun.
        request = transactions_pb2.InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=1
        )
        response = self._retrying(lambda: self._call(lambda s: s.InitProducerId, request))
        if isinstance(response, RiverlogError):
            return response
        return FencedProducer(tid, response.producer_id, response.producer_epoch)

    def list_transactions(
        self, states: Iterable[str] = (), producer_ids: Iterable[int] = ()
    ) -> list[TransactionListing]:
        """The transactional ids the coordinators know, optionally only in `states` or of
        `producer_ids`."""
        request = transactions_pb2.ListTransactionsRequest(
            state_filters=list(states), producer_id_filters=list(producer_ids)
        )
        response = self._call(lambda s: s.ListTransactions, request)
        if response.error_code != ErrorCode.NONE:
            raise error_for(response.error_code, response.error_message)
        return sorted(
            (
                TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
                for t in response.transactions
            ),
            key=lambda t: t.transactional_id,
        )

    def describe_transactions(
        self, transactional_ids: Iterable[str]
    ) -> dict[str, TransactionDescription | RiverlogError]:
        """Each id's transaction, or its error (TRANSACTIONAL_ID_NOT_FOUND for an unknown id)."""
        request = transactions_pb2.DescribeTransactionsRequest(
            transactional_ids=list(transactional_ids)
        )
        response = self._call(lambda s: s.DescribeTransactions, request)
        out: dict[str, TransactionDescription | RiverlogError] = {}
        for t in response.transactions:
            if t.error_code != ErrorCode.NONE:
                out[t.transactional_id] = error_for(t.error_code, t.error_message)
                continue
            partitions = tuple(
                TopicPartition(topic.name, p) for topic in t.topics for p in topic.partitions
            )
            out[t.transactional_id] = TransactionDescription(
                t.transactional_id,
                t.transaction_state,
                t.producer_id,
                t.producer_epoch,
                t.transaction_timeout_ms,
                t.transaction_start_time_ms,
                partitions,
            )
        return out
