"""The transaction coordinator of one partition, driven the way its shard drives it: each
outcome's records are "written" (replayed), then its continuation runs; markers are sent through
a recording channel whose completion the test triggers. No I/O, a manual clock."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.config import CoordinatorConfig
from riverlog.services.coordinator.group.outcome import Outcome
from riverlog.services.coordinator.records import CoordinatorRecord
from riverlog.services.coordinator.txn.coordinator import (
    ProducerIdAndEpoch,
    TransactionCoordinator,
)
from riverlog.services.coordinator.txn.metadata import TransactionMetadata
from riverlog.services.coordinator.txn.state import TransactionState

pytestmark = pytest.mark.timeout(30)

S = TransactionState
A0, B1 = TopicPartition("a", 0), TopicPartition("b", 1)
CONFIG = CoordinatorConfig(
    transaction_abort_timed_out_transaction_cleanup_interval_ms=1_000,
    transaction_remove_expired_transaction_cleanup_interval_ms=1_000,
    transactional_id_expiration_ms=60_000,
)


class Markers:
    def __init__(self) -> None:
        self.sent: list[tuple[TransactionMetadata, Callable[[], None]]] = []

    def send(self, meta: TransactionMetadata, done: Callable[[], None]) -> None:
        self.sent.append((meta, done))

    def deliver(self) -> list[TransactionMetadata]:
        sent, self.sent = self.sent, []
        for _, done in sent:
            done()
        return [meta for meta, _ in sent]


class Harness:
    def __init__(self, fail_writes: bool = False) -> None:
        self.clock = ManualClock()
        self.markers = Markers()
        self.notified: list[Callable[[TransactionCoordinator], None]] = []
        self.log: list[CoordinatorRecord] = []
        self.fail_writes = fail_writes
        self.coord = self.new_coordinator()
        self.coord.loaded()

    def new_coordinator(self) -> TransactionCoordinator:
        return TransactionCoordinator(
            CONFIG, self.clock, self.markers, itertools.count(1000).__next__, self.notified.append
        )

    def write(self, outcome: Outcome) -> None:
        error = ErrorCode.NOT_ENOUGH_REPLICAS if self.fail_writes else ErrorCode.NONE
        if outcome.records and error is ErrorCode.NONE:
            for record in outcome.records:
                self.log.append(record)
                self.coord.replay(record.key, record.value)
        if outcome.after is not None:
            outcome.after(error)
        self.settle()

    def settle(self) -> None:
        """What the shard does after each step: run notifications, write the outbox."""
        while self.notified or self.coord.outbox.items:
            notified = list(self.notified)
            self.notified.clear()  # the coordinator holds this list's append
            for handler in notified:
                handler(self.coord)
            for outcome in self.coord.drain_outbox():
                self.write(outcome)

    def call(self, method: str, *args: Any) -> Any:
        box: list[Any] = []
        self.write(getattr(self.coord, method)(*args, box.append))
        assert len(box) == 1, f"{method} answered {len(box)} times"
        return box[0]

    def tick(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coord.timer.expire()
        self.settle()

    def state(self, tid: str = "t") -> TransactionMetadata:
        return self.coord.transactions[tid]


def begin(h: Harness, tid: str = "t", timeout_ms: int = 10_000) -> ProducerIdAndEpoch:
    producer = h.call("init_producer_id", tid, timeout_ms)
    assert isinstance(producer, ProducerIdAndEpoch)
    added = h.call("add_partitions", tid, producer.producer_id, producer.producer_epoch, [A0, B1])
    assert added == producer
    return producer


@pytest.mark.parametrize("commit", [True, False])
def test_a_transaction_ends_after_every_marker_is_written(commit: bool) -> None:
    h = Harness()
    producer = begin(h)
    ended = h.call("end_transaction", "t", producer.producer_id, producer.producer_epoch, commit)
    assert ended == ProducerIdAndEpoch(producer.producer_id, producer.producer_epoch + 1)
    assert h.state().state is (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT)
    [marked] = h.markers.deliver()
    assert marked.partitions == {A0, B1} and marked.producer_epoch == producer.producer_epoch + 1
    h.settle()
    assert h.state().state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert h.state().partitions == frozenset()


def test_a_new_session_fences_and_aborts_the_old_one_and_then_gets_its_epoch() -> None:
    h = Harness()
    old = begin(h)
    fenced = h.call("init_producer_id", "t", 10_000)
    assert isinstance(fenced, RiverlogError)
    assert fenced.code is ErrorCode.CONCURRENT_TRANSACTIONS
    assert h.state().state is S.PREPARE_ABORT  # fenced, then the abort was written
    [aborted] = h.markers.deliver()
    assert aborted.producer_epoch == old.producer_epoch + 1
    h.settle()
    assert h.state().state is S.COMPLETE_ABORT
    again = h.call("init_producer_id", "t", 10_000)
    assert again == ProducerIdAndEpoch(old.producer_id, old.producer_epoch + 2)
    stale = h.call("add_partitions", "t", old.producer_id, old.producer_epoch, [A0])
    assert isinstance(stale, RiverlogError) and stale.code is ErrorCode.PRODUCER_FENCED


def test_a_timed_out_transaction_is_aborted_by_the_sweep() -> None:
    h = Harness()
    producer = begin(h, timeout_ms=5_000)
    h.tick(4_000)
    assert h.state().state is S.ONGOING
    h.tick(2_000)
    assert h.state().state is S.PREPARE_ABORT
    h.markers.deliver()
    h.settle()
    assert h.state().state is S.COMPLETE_ABORT
    late = h.call("end_transaction", "t", producer.producer_id, producer.producer_epoch, True)
    assert isinstance(late, RiverlogError) and late.code is ErrorCode.PRODUCER_FENCED


def test_a_new_owner_finishes_what_the_previous_owner_left_prepared() -> None:
    h = Harness()
    producer = begin(h)
    h.call("end_transaction", "t", producer.producer_id, producer.producer_epoch, True)
    h.markers.sent.clear()  # the owner died before the markers were written
    h.coord = h.new_coordinator()
    for record in h.log:
        h.coord.replay(record.key, record.value)
    assert h.state().state is S.PREPARE_COMMIT
    h.coord.loaded()
    [resent] = h.markers.deliver()
    assert resent.state is S.PREPARE_COMMIT and resent.partitions == {A0, B1}
    h.settle()
    assert h.state().state is S.COMPLETE_COMMIT


def test_a_failed_write_changes_nothing_and_answers_the_error() -> None:
    h = Harness(fail_writes=True)
    answer = h.call("init_producer_id", "t", 10_000)
    assert isinstance(answer, RiverlogError) and answer.code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert h.coord.transactions == {}


def test_an_idle_id_expires_into_a_tombstone() -> None:
    h = Harness()
    h.call("init_producer_id", "t", 10_000)
    h.tick(59_000)
    assert "t" in h.coord.transactions
    h.tick(2_000)
    assert "t" not in h.coord.transactions
    assert h.log[-1].value is None  # the tombstone


def test_bad_requests_are_refused_and_change_nothing() -> None:
    h = Harness()
    empty = h.call("init_producer_id", "", 10_000)
    assert isinstance(empty, RiverlogError) and empty.code is ErrorCode.INVALID_REQUEST
    too_long = h.call("init_producer_id", "t", CONFIG.transaction_max_timeout_ms + 1)
    assert isinstance(too_long, RiverlogError)
    assert too_long.code is ErrorCode.INVALID_TRANSACTION_TIMEOUT
    unknown = h.call("end_transaction", "nope", 1, 0, True)
    assert isinstance(unknown, RiverlogError)
    assert unknown.code is ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert h.coord.transactions == {} and h.log == []


def test_verify_only_answers_without_adding_or_writing() -> None:
    h = Harness()
    producer = begin(h)
    written = len(h.log)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert h.call("verify_partitions", "t", pid, epoch, [A0]) is None
    refused = h.call("verify_partitions", "t", pid, epoch, [TopicPartition("c", 0)])
    assert isinstance(refused, RiverlogError) and refused.code is ErrorCode.INVALID_TXN_STATE
    assert len(h.log) == written and h.state().partitions == {A0, B1}


def test_an_operators_abort_fences_and_aborts_an_open_transaction() -> None:
    h = Harness()
    producer = begin(h)
    previous, now = h.call("admin_abort", "t")
    assert previous is S.ONGOING
    assert now == ProducerIdAndEpoch(producer.producer_id, producer.producer_epoch + 1)
    [aborted] = h.markers.deliver()
    assert aborted.state is S.PREPARE_ABORT and aborted.partitions == {A0, B1}
    h.settle()
    assert h.state().state is S.COMPLETE_ABORT
    late = h.call("end_transaction", "t", producer.producer_id, producer.producer_epoch, True)
    assert isinstance(late, RiverlogError) and late.code is ErrorCode.PRODUCER_FENCED
    assert h.call("admin_abort", "t")[0] is S.COMPLETE_ABORT  # nothing open: unchanged
    unknown = h.call("admin_abort", "never")
    assert isinstance(unknown, RiverlogError)
    assert unknown.code is ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
