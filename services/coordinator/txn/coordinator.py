"""The transaction coordinator of one `__transaction_state` partition: the metadata of its
transactional.ids, `replay()` (the one path by which written records change it, live and while
loading), the request handlers, and the two sweeps (timed-out transactions, expired ids).

Handlers decide with the pure builders of `transitions.py` and return an `Outcome`: the record
to write and what to do once it is durable. Writing markers is the `MarkerChannel`'s job, off
the shard's task (it calls partition leaders, and retries until every marker is written); when
it is done it hands `markers_written` back to the shard, which writes CompleteCommit or
CompleteAbort. A new owner that loads a transaction in PrepareCommit, PrepareAbort or
PrepareEpochFence carries on where the previous owner stopped (Kafka does the same on load).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition

from ..config import CoordinatorConfig
from ..group.outcome import Outbox, Outcome
from ..group.timer import Timer
from ..records import LogRecord
from . import transitions as tx
from .metadata import TransactionMetadata
from .records import decode_transaction, decode_transaction_key, transaction_record
from .state import TransactionState

log = logging.getLogger(__name__)

Reply = Callable[[Any], None]
_TIMEOUT_SWEEP = "txn-timeouts"
_EXPIRY_SWEEP = "txn-expiry"
_COMPLETE_RETRY_MS = 1_000


class MarkerChannel(Protocol):
    def send(self, meta: TransactionMetadata, done: Callable[[], None]) -> None:
        """Write `meta`'s commit or abort marker (its state says which, with its producer id
        and epoch) to every partition of `meta`, retrying until all are written, then call
        `done` on the coordinator's event loop. Never raises."""


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: TransactionState


class TransactionCoordinator:
    """State of one `__transaction_state` partition. Used from its shard's task only."""

    def __init__(
        self,
        config: CoordinatorConfig,
        clock: Clock,
        markers: MarkerChannel,
        fresh_producer_id: Callable[[], int],
        notify: Callable[[Callable[[TransactionCoordinator], None]], None],
    ) -> None:
        self.config = config
        self.clock = clock
        self.markers = markers
        self.fresh_producer_id = fresh_producer_id
        self.notify = notify  # runs a callable on the shard's task (from any task of the loop)
        self._timer = Timer(clock)
        self.outbox = Outbox()
        self.transactions: dict[str, TransactionMetadata] = {}
        self.loading = True

    # --- ShardState ---------------------------------------------------------------------------

    @property
    def timer(self) -> Timer:
        return self._timer

    def drain_outbox(self) -> list[Outcome]:
        return self.outbox.drain()

    def replay_record(self, record: LogRecord) -> None:
        """Only the coordinator's own records count here (no transaction writes to
        `__transaction_state`, so there are no markers or transactional batches)."""
        if record.marker is None and not record.transactional:
            self.replay(record.key, record.value)

    def replay(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one `__transaction_state` record; unknown or malformed ones are skipped."""
        if key is None:
            return
        try:
            transactional_id = decode_transaction_key(key)
            if transactional_id is None:
                return  # an owner marker
            if value is None:
                self.transactions.pop(transactional_id, None)
            else:
                self.transactions[transactional_id] = decode_transaction(transactional_id, value)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("skipping an unreadable __transaction_state record: %s", exc)

    def loaded(self) -> None:
        """Serve, start the sweeps, and finish what the previous owner left half done."""
        self.loading = False
        self._schedule_sweeps()
        for meta in list(self.transactions.values()):
            if meta.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
                self._send_markers(meta)
            elif meta.state is TransactionState.PREPARE_EPOCH_FENCE:
                self.outbox.push(self._abort_fenced(meta))

    # --- requests ---------------------------------------------------------------------------

    def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        reply: Reply,
        expected: tuple[int, int] | None = None,
    ) -> Outcome:
        if not transactional_id:
            reply(RiverlogError("the transactional id is empty", ErrorCode.INVALID_REQUEST))
            return Outcome()
        try:
            decision = tx.init_producer_id(
                self.transactions.get(transactional_id),
                transactional_id,
                timeout_ms,
                self.config.transaction_max_timeout_ms,
                self.clock.time_ms(),
                self.fresh_producer_id,
                expected,
            )
        except RiverlogError as exc:  # no producer id to hand out yet (retriable)
            reply(exc)
            return Outcome()
        return self._apply(decision, reply)

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        reply: Reply,
    ) -> Outcome:
        decision = tx.add_partitions(
            self.transactions.get(transactional_id),
            producer_id,
            producer_epoch,
            partitions,
            self.clock.time_ms(),
        )
        return self._apply(decision, reply)

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition],
        reply: Reply,
    ) -> Outcome:
        """AddPartitionsToTxn with verify_only (KIP-890 part 1): an answer, nothing written."""
        current = self.transactions.get(transactional_id)
        error = tx.verify_partitions(current, producer_id, producer_epoch, partitions)
        reply(None if error is ErrorCode.NONE else RiverlogError(code=error))
        return Outcome()

    def admin_abort(self, transactional_id: str, reply: Reply) -> Outcome:
        """Fence the id and abort what it has open (an operator's abort of a hanging
        transaction); the reply is (the state it was in, the producer's id and epoch now)."""
        current = self.transactions.get(transactional_id)
        if current is None:
            reply(RiverlogError(code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND))
            return Outcome()
        previous = current.state
        decision = tx.admin_abort(current, self.clock.time_ms())
        if decision.write is not None:
            log.info("%s: aborted by an operator (was %s)", transactional_id, previous)

        def answer(value: object) -> None:
            reply(value if isinstance(value, RiverlogError) else (previous, value))

        return self._apply(decision, answer)

    def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        commit: bool,
        reply: Reply,
    ) -> Outcome:
        try:
            decision = tx.end_transaction(
                self.transactions.get(transactional_id),
                producer_id,
                producer_epoch,
                commit,
                self.clock.time_ms(),
                self.fresh_producer_id,
            )
        except RiverlogError as exc:  # the epoch rolls over and no id is at hand (retriable)
            reply(exc)
            return Outcome()
        return self._apply(decision, reply)

    def describe(self, transactional_id: str) -> TransactionMetadata | None:
        return self.transactions.get(transactional_id)

    def listing(
        self, states: frozenset[TransactionState] = frozenset()
    ) -> list[TransactionListing]:
        return [
            TransactionListing(m.transactional_id, m.producer_id, m.state)
            for m in self.transactions.values()
            if not states or m.state in states
        ]

    # --- follow-ups -------------------------------------------------------------------------

    def markers_written(self, transactional_id: str, producer_epoch: int) -> None:
        """Every marker of the transaction is written: CompleteCommit or CompleteAbort. Ignored
        when the transaction moved on meanwhile (another owner, or a retry that completed)."""
        meta = self.transactions.get(transactional_id)
        if meta is None or meta.producer_epoch != producer_epoch:
            return
        if meta.state not in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            return
        completed = tx.complete(meta, self.clock.time_ms())

        def after(error: ErrorCode) -> None:
            if error is not ErrorCode.NONE:  # the markers are written: only the record is due
                log.warning("%s: cannot complete (%s); retrying", transactional_id, error.name)
                self._timer.schedule(
                    f"complete:{transactional_id}",
                    _COMPLETE_RETRY_MS,
                    lambda: self.markers_written(transactional_id, producer_epoch),
                )

        self.outbox.push(Outcome([transaction_record(completed)], after))

    def _apply(self, decision: tx.Decision, reply: Reply) -> Outcome:
        """Answer at once when nothing is written; otherwise write, then answer and follow up."""
        if decision.write is None:
            reply(_answer(decision.error, decision.reply))
            return Outcome()
        written = decision.write

        def after(error: ErrorCode) -> None:
            if error is not ErrorCode.NONE:
                reply(RiverlogError(f"cannot write the transaction state: {error.name}", error))
                return
            reply(_answer(decision.error, written))
            self._follow_up(written, decision.then)

        return Outcome([transaction_record(written)], after)

    def _follow_up(self, meta: TransactionMetadata, then: tx.FollowUp) -> None:
        if then is tx.FollowUp.WRITE_MARKERS:
            self._send_markers(meta)
        elif then is tx.FollowUp.ABORT_FENCED:
            self.outbox.push(self._abort_fenced(meta))

    def _abort_fenced(self, meta: TransactionMetadata) -> Outcome:
        decision = tx.end_transaction(
            meta,
            meta.producer_id,
            meta.producer_epoch,
            False,
            self.clock.time_ms(),
            self.fresh_producer_id,
            from_coordinator=True,
        )
        if decision.write is None:  # a bug: the fence always leads to an abort
            log.error("%s: cannot abort after the fence: %s", meta.transactional_id, decision)
            return Outcome()
        return self._apply(decision, lambda _: None)

    def _send_markers(self, meta: TransactionMetadata) -> None:
        if not meta.partitions:
            self.markers_written(meta.transactional_id, meta.producer_epoch)
            return
        tid, epoch = meta.transactional_id, meta.producer_epoch
        self.markers.send(meta, lambda: self.notify(lambda c: c.markers_written(tid, epoch)))

    # --- sweeps -----------------------------------------------------------------------------

    def _schedule_sweeps(self) -> None:
        self._timer.schedule(
            _TIMEOUT_SWEEP,
            self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            self.abort_timed_out,
        )
        self._timer.schedule(
            _EXPIRY_SWEEP,
            self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
            self.remove_expired,
        )

    def abort_timed_out(self) -> None:
        now = self.clock.time_ms()
        for meta in list(self.transactions.values()):
            decision = tx.abort_expired(meta, now)
            if decision is not None:
                log.info("%s: transaction timed out; aborting it", meta.transactional_id)
                self.outbox.push(self._apply(decision, lambda _: None))
        self._timer.schedule(
            _TIMEOUT_SWEEP,
            self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            self.abort_timed_out,
        )

    def remove_expired(self) -> None:
        now = self.clock.time_ms()
        for meta in list(self.transactions.values()):
            dead = tx.expire_id(meta, now, self.config.transactional_id_expiration_ms)
            if dead is not None:
                self.outbox.push(Outcome([transaction_record(dead)], _log_failure(dead)))
        self._timer.schedule(
            _EXPIRY_SWEEP,
            self.config.transaction_remove_expired_transaction_cleanup_interval_ms,
            self.remove_expired,
        )


def _answer(error: ErrorCode, meta: TransactionMetadata | None) -> object:
    if error is not ErrorCode.NONE:
        return RiverlogError(code=error)
    if meta is None:
        return RiverlogError(code=ErrorCode.UNKNOWN_SERVER_ERROR)
    producer_id, epoch = meta.client_producer
    return ProducerIdAndEpoch(producer_id, epoch)


def _log_failure(meta: TransactionMetadata) -> Callable[[ErrorCode], None]:
    def after(error: ErrorCode) -> None:
        if error is not ErrorCode.NONE:
            # The next sweep, retry or owner writes it again; nothing was made current.
            log.warning("%s: cannot write %s: %s", meta.transactional_id, meta.state, error.name)

    return after
