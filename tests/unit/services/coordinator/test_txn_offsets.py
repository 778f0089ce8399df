"""TxnOffsetCommit in the group coordinator (decision 0031): offsets written as the producer's
transactional records stay pending, invisible to OffsetFetch (UNSTABLE_OFFSET_COMMIT under
require_stable), until the transaction's marker commits or drops them; loading replays the same
way (committed ones count, aborted ones never, open ones stay pending), and a marker only ends
what was written at an older epoch (KIP-890's bump), never the producer's next transaction."""

from __future__ import annotations

import pytest
from coord_harness import CONFIG, Harness, join_ok

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.coordinator import GroupCoordinator
from riverlog.services.coordinator.group.outcome import Outcome
from riverlog.services.coordinator.offsets.pending import PendingOffsets
from riverlog.services.coordinator.offsets.store import (
    CommitItem,
    CommitRequest,
    TxnCommitRequest,
)
from riverlog.services.coordinator.records import (
    LogRecord,
    OffsetValue,
    TxnEndKey,
    decode_key,
    offset_record,
)

pytestmark = pytest.mark.timeout(30)

E = ErrorCode
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
PID = 4000


def value(offset: int) -> OffsetValue:
    return OffsetValue(offset, -1, "", 0)


class Log:
    """A group coordinator and the log it wrote, replayed as the shard does (live), and
    re-loadable into a fresh coordinator (what a new owner reads)."""

    def __init__(self) -> None:
        self.clock = ManualClock()
        self.records: list[LogRecord] = []
        self.coord = self.fresh()
        self.coord.loaded()

    def fresh(self) -> GroupCoordinator:
        return GroupCoordinator(CONFIG, self.clock, lambda t: 4, new_member_id=lambda c: "m-1")

    def write(self, outcome: Outcome) -> None:
        """What the shard does: the marker, the records, then the replay of each."""
        written: list[LogRecord] = []
        if outcome.marker is not None:
            m = outcome.marker
            written.append(
                LogRecord(-1, None, None, m.producer_id, m.producer_epoch, -1, True, m.committed)
            )
        p = outcome.producer
        for r in outcome.records:
            if p is None:
                written.append(LogRecord(-1, r.key, r.value))
            else:
                last = p.base_sequence + len(outcome.records) - 1
                written.append(
                    LogRecord(-1, r.key, r.value, p.producer_id, p.producer_epoch, last, True)
                )
        for record in written:
            self.records.append(record)
            self.coord.replay_record(record)
        if outcome.after is not None:
            outcome.after(E.NONE)

    def txn_commit(
        self,
        offsets: dict[TopicPartition, int],
        epoch: int = 0,
        group: str = "g",
        pid: int = PID,
        generation: int = -1,
        member: str = "",
    ) -> tuple[list[tuple[TopicPartition, ErrorCode]], Outcome]:
        answers: list[list[tuple[TopicPartition, ErrorCode]]] = []
        req = TxnCommitRequest(
            "tx",
            group,
            pid,
            epoch,
            generation,
            member,
            None,
            [CommitItem(tp, o) for tp, o in offsets.items()],
        )
        outcome = self.coord.offsets.txn_commit(req, answers.append)
        self.write(outcome)
        return answers[0], outcome

    def commit(self, offsets: dict[TopicPartition, int], group: str = "g") -> None:
        req = CommitRequest(group, -1, "", None, [CommitItem(tp, o) for tp, o in offsets.items()])
        self.write(self.coord.offsets.commit(req, lambda _: None))

    def end(self, committed: bool, marker_epoch: int = 1, pid: int = PID) -> ErrorCode:
        answers: list[ErrorCode] = []
        self.write(self.coord.end_transaction(pid, marker_epoch, committed, 0, answers.append))
        return answers[0]

    def fetch(self, group: str = "g", stable: bool = False) -> dict[TopicPartition, object]:
        rows = self.coord.offsets.fetch(group, [T0, T1], stable)
        return {r.tp: (r.error_code if r.error_code != E.NONE else r.offset) for r in rows}

    def reload(self) -> GroupCoordinator:
        fresh = self.fresh()
        for record in self.records:
            fresh.replay_record(record)
        fresh.loaded()
        return fresh


# --- the pure pending state -------------------------------------------------------------------


def test_pending_offsets_commit_abort_and_epochs() -> None:
    pending = PendingOffsets()
    pending.add(PID, 3, 0, "g", T0, value(5))
    pending.add(PID, 3, 1, "g", T0, value(7))  # last one wins within the transaction
    assert pending.next_sequence(PID, 3) == 2
    assert pending.next_sequence(PID, 4) == 0  # a new epoch starts at 0
    assert pending.has_pending("g", T0) and not pending.has_pending("g", T1)
    assert pending.newer_epoch(PID, 2) and not pending.newer_epoch(PID, 3)
    # a marker at the same epoch is not this transaction's end (it ended with a bump)
    assert pending.complete(PID, 3, True) == []
    assert pending.has_pending("g", T0)
    assert pending.complete(PID, 4, True) == [("g", T0, value(7))]
    assert not pending.has_pending("g", T0)
    pending.add(PID, 4, 0, "g", T1, value(9))
    assert pending.complete(PID, 5, False) == []  # aborted: dropped
    assert pending.by_producer == {}


def test_a_plain_commit_after_a_pending_one_wins_at_the_commit() -> None:
    pending = PendingOffsets()
    pending.add(PID, 0, 0, "g", T0, value(5))
    pending.add(PID, 0, 0, "g", T1, value(6))
    pending.superseded("g", T0)
    assert pending.has_pending("g", T0)  # still unstable until the marker
    assert pending.complete(PID, 1, True) == [("g", T1, value(6))]


# --- TxnOffsetCommit and OffsetFetch ----------------------------------------------------------


def test_transactional_offsets_are_invisible_until_the_commit_marker() -> None:
    log = Log()
    log.commit({T0: 1})
    answer, outcome = log.txn_commit({T0: 10, T1: 11})
    assert answer == [(T0, E.NONE), (T1, E.NONE)]
    assert outcome.producer is not None
    assert (outcome.producer.producer_id, outcome.producer.producer_epoch) == (PID, 0)
    assert outcome.producer.base_sequence == 0
    assert log.fetch() == {T0: 1, T1: -1}
    assert log.fetch(stable=True) == {
        T0: E.UNSTABLE_OFFSET_COMMIT,
        T1: E.UNSTABLE_OFFSET_COMMIT,
    }
    _, second = log.txn_commit({T0: 12})
    assert second.producer is not None and second.producer.base_sequence == 2
    assert log.end(committed=True) == E.NONE
    assert log.fetch(stable=True) == {T0: 12, T1: 11}
    # the marker written at storage, then the owner's fence-check record
    assert decode_key(log.records[-1].key or b"") == TxnEndKey(PID, 1, True)
    assert log.records[-2].marker is True


def test_an_aborted_transactions_offsets_never_appear() -> None:
    log = Log()
    log.commit({T0: 1})
    log.txn_commit({T0: 10})
    assert log.end(committed=False) == E.NONE
    assert log.fetch(stable=True) == {T0: 1, T1: -1}
    assert log.end(committed=True) == E.NONE  # a repeated marker: nothing pending any more
    assert log.fetch() == {T0: 1, T1: -1}


def test_a_late_marker_does_not_end_the_next_transaction() -> None:
    log = Log()
    log.txn_commit({T0: 10}, epoch=0)
    assert log.end(committed=True, marker_epoch=1) == E.NONE
    log.txn_commit({T0: 20}, epoch=1)  # the next transaction, at the bumped epoch
    assert log.end(committed=True, marker_epoch=1) == E.NONE  # the first marker again
    assert log.fetch(stable=True) == {T0: E.UNSTABLE_OFFSET_COMMIT, T1: -1}
    assert log.fetch() == {T0: 10, T1: -1}
    log.end(committed=True, marker_epoch=2)
    assert log.fetch() == {T0: 20, T1: -1}


def test_txn_commit_validation() -> None:
    log = Log()
    before = len(log.records)
    # an unknown group with a generation: ILLEGAL_GENERATION
    assert log.txn_commit({T0: 1}, generation=3, member="m")[0] == [(T0, E.ILLEGAL_GENERATION)]
    # bad producer: INVALID_REQUEST
    assert log.txn_commit({T0: 1}, pid=-1)[0] == [(T0, E.INVALID_REQUEST)]
    assert log.txn_commit({T0: 1}, group="")[0] == [(T0, E.INVALID_GROUP_ID)]
    assert len(log.records) == before  # nothing written
    # a pending transaction at a newer epoch fences an older one
    log.txn_commit({T0: 1}, epoch=5)
    assert log.txn_commit({T0: 2}, epoch=4)[0] == [(T0, E.PRODUCER_FENCED)]
    assert log.txn_commit({T0: -3}, epoch=5)[0] == [(T0, E.INVALID_COMMIT_OFFSET_SIZE)]


def test_member_checks_of_kip_447() -> None:
    h = Harness()
    member = join_ok(h.join_new("g")).member_id
    generation = h.coord.group_of("g").generation_id  # type: ignore[union-attr]
    assert h.state() == "CompletingRebalance"

    def txn(generation: int, member_id: str) -> list[tuple[TopicPartition, ErrorCode]]:
        answers: list[list[tuple[TopicPartition, ErrorCode]]] = []
        req = TxnCommitRequest("tx", "g", PID, 0, generation, member_id, None, [CommitItem(T0, 5)])
        h.apply(h.coord.offsets.txn_commit(req, answers.append))
        return answers[0]

    # awaiting the assignment a plain commit is refused; a transactional one of the member is
    # accepted (Kafka's isTransactional)
    assert txn(generation, member) == [(T0, E.NONE)]
    assert txn(generation + 1, member) == [(T0, E.ILLEGAL_GENERATION)]
    assert txn(generation, "other") == [(T0, E.UNKNOWN_MEMBER_ID)]
    # no generation and no member: KIP-447's checks are off, even for a non-empty group
    assert txn(-1, "") == [(T0, E.NONE)]


# --- loading ----------------------------------------------------------------------------------


def test_loading_applies_committed_drops_aborted_and_keeps_open_ones_pending() -> None:
    log = Log()
    log.commit({T0: 1, T1: 1})
    log.txn_commit({T0: 10}, pid=1)
    log.txn_commit({T1: 20}, pid=2)
    log.txn_commit({T1: 30}, pid=3)
    log.end(committed=True, pid=1)
    log.end(committed=False, pid=2)
    loaded = log.reload()
    assert {r.tp: r.offset for r in loaded.offsets.fetch("g", [T0, T1])} == {T0: 10, T1: 1}
    stable = loaded.offsets.fetch("g", [T0, T1], require_stable=True)
    assert [r.error_code for r in stable] == [E.NONE, E.UNSTABLE_OFFSET_COMMIT]
    # the open one continues with the next sequence, and commits later
    assert loaded.offsets.pending.next_sequence(3, 0) == 1
    log.coord = loaded
    log.end(committed=True, pid=3)
    assert log.fetch() == {T0: 10, T1: 30}
    assert {r.tp: r.offset for r in log.reload().offsets.fetch("g", [T0, T1])} == {
        T0: 10,
        T1: 30,
    }


def test_loading_ignores_markers_of_producers_with_nothing_pending() -> None:
    log = Log()
    log.commit({T0: 1})
    log.records.append(LogRecord(-1, None, None, 77, 3, -1, True, True))
    record = offset_record("g", T1, value(5))
    log.records.append(LogRecord(-1, record.key, record.value, 78, 0, 0, True))
    loaded = log.reload()
    assert {r.tp: r.offset for r in loaded.offsets.fetch("g", [T0, T1])} == {T0: 1, T1: -1}


def test_retention_keeps_an_offset_a_transaction_may_replace() -> None:
    log = Log()
    log.commit({T0: 1, T1: 1})
    log.txn_commit({T0: 10})
    log.clock.advance(CONFIG.offsets_retention_ms + 1)
    expired = {decode_key(r.key) for r in log.coord.offsets.expire()}  # type: ignore[misc]
    assert [k.tp for k in expired] == [T1]  # type: ignore[union-attr]


def test_a_deleted_groups_pending_offsets_do_not_come_back_with_the_commit() -> None:
    log = Log()
    log.txn_commit({T0: 10})
    answers: list[ErrorCode] = []
    log.write(log.coord.delete_group("g", answers.append))
    assert answers == [E.NONE]
    log.end(committed=True)
    assert log.fetch() == {T0: -1, T1: -1}
    assert {r.tp: r.offset for r in log.reload().offsets.fetch("g", [T0])} == {T0: -1}
