"""Open transactions in the producer state: a transactional batch opens one, its marker ends
it, the first unstable offset and the LSO follow, an ABORT is indexed in its segment's
.txnindex, an older coordinator's marker is fenced, and all of it survives a restart (the
snapshot's open transactions, the replay's rebuilt .txnindex)."""

from __future__ import annotations

from pathlib import Path

import pytest

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker
from riverlog.common.records.header import parse_header
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import AppendInfo, AppendOrigin, LogConfig, PartitionLog
from riverlog.services.storage.log.txn_index import AbortedTxn
from riverlog.services.storage.producer import ProducerStateManager
from riverlog.services.storage.producer.snapshot import list_snapshots, read_snapshot
from riverlog.services.storage.producer.transactions import OngoingTxns

pytestmark = pytest.mark.timeout(30)

TP = TopicPartition("orders", 0)
TS = 1_700_000_000_000


def data(pid: int, seq: int, epoch: int = 0, count: int = 1, txn: bool = True) -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )
    for i in range(count):
        builder.append(TS, b"k", b"v%d" % (seq + i))
    return builder.build()


def marker(pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_txn_marker(EndTxnMarker(kind, coordinator_epoch), pid, epoch, TS)


class Leader:
    def __init__(self, path: Path, clock: ManualClock, **config: str) -> None:
        self.path, self.clock = path, clock
        self.config = LogConfig.from_overrides(config)
        self.open()

    def open(self, clean: bool = False) -> None:
        self.log = PartitionLog.open(
            self.path / str(TP), TP, self.config, self.clock, clean_shutdown=clean
        )
        self.state = ProducerStateManager(self.log, self.clock)

    def append(self, payload: bytes, hw: bool = True) -> AppendInfo:
        control = parse_header(payload, 0).is_control
        origin = AppendOrigin.COORDINATOR if control else AppendOrigin.CLIENT
        check = self.state.check_leader_append(payload)
        assert check.duplicate is None
        info = self.log.append_as_leader(payload, 0, origin)
        self.state.on_leader_append(check, info)
        if hw:
            self.log.high_watermark = self.log.log_end_offset
        return info

    @property
    def lso(self) -> int:
        return self.state.last_stable_offset(self.log.high_watermark)

    def restart(self, clean: bool) -> None:
        hw = self.log.high_watermark
        if clean:
            self.log.close()
        else:  # kill -9: no snapshot at close, the tail to recover
            for segment in self.log.segments:
                segment.log.close()
        self.open(clean)
        self.log.update_high_watermark(hw)


@pytest.fixture
def leader(tmp_path: Path) -> Leader:
    return Leader(tmp_path, ManualClock())


# --- the pure tracker ---------------------------------------------------------------------------


def test_the_first_unstable_offset_is_the_oldest_open_transaction() -> None:
    txns = OngoingTxns()
    assert txns.first_unstable_offset(10) is None and txns.last_stable_offset(10) == 10
    txns.begin(1, 4)
    txns.begin(2, 6)
    txns.begin(1, 8)  # a later batch of an open transaction changes nothing
    assert txns.ongoing == {1: 4, 2: 6}
    assert txns.last_stable_offset(10) == 4
    done = txns.complete(1, 9, aborted=True)
    # the abort's LSO is the other open transaction's first offset
    assert done is not None and (done.first_offset, done.last_offset) == (4, 9)
    assert done.last_stable_offset == 6
    # completed but the marker not yet below the high watermark: still unstable
    assert txns.first_unstable_offset(9) == 4
    assert txns.first_unstable_offset(10) == 6
    assert txns.complete(2, 11, aborted=False) is not None
    assert txns.last_stable_offset(12) == 12
    assert txns.complete(2, 13, aborted=False) is None  # nothing open: an empty transaction


def test_an_abort_alone_has_its_marker_as_last_stable_offset() -> None:
    txns = OngoingTxns()
    txns.begin(7, 0)
    done = txns.complete(7, 3, aborted=True)
    assert done is not None and done.last_stable_offset == 4


# --- the manager on a real log ------------------------------------------------------------------


def test_a_transaction_holds_the_lso_until_its_marker_is_replicated(leader: Leader) -> None:
    leader.append(data(1, 0, count=2, txn=False))  # 0-1 idempotent, no transaction
    assert leader.lso == 2
    leader.append(data(5, 0, count=3))  # 2-4 open
    leader.append(data(1, 2, txn=False))  # 5
    assert leader.state.ongoing_txns == {5: 2}
    assert leader.lso == 2 and leader.log.high_watermark == 6
    leader.append(marker(5, 1, commit=True), hw=False)  # 6, not yet replicated
    assert leader.lso == 2
    leader.log.high_watermark = 7
    assert leader.lso == 7
    assert leader.state.ongoing_txns == {}
    assert leader.log.collect_aborted_txns(0, 7) == []


def test_an_abort_is_indexed_in_the_segment_of_its_marker(leader: Leader) -> None:
    leader.append(data(5, 0, count=2))  # 0-1
    leader.append(data(6, 0))  # 2
    leader.log.roll()
    leader.append(marker(5, 1, commit=False))  # 3
    assert leader.lso == 2  # producer 6 still open
    expected = AbortedTxn(5, 0, 3, 2)
    assert leader.log.segments[1].txn_index.entries == (expected,)
    assert leader.log.segments[0].txn_index.entries == ()
    assert leader.log.collect_aborted_txns(0, 4) == [expected]
    assert leader.log.collect_aborted_txns(4, 10) == []
    assert leader.log.collect_aborted_txns(0, 1) == [expected]  # data overlaps [0, 1)


def test_a_marker_from_an_older_coordinator_is_fenced(leader: Leader) -> None:
    leader.append(data(5, 0))
    leader.append(marker(5, 1, commit=True, coordinator_epoch=4))
    leader.append(data(5, 0, epoch=1))
    with pytest.raises(RiverlogError) as err:
        leader.append(marker(5, 2, commit=False, coordinator_epoch=3))
    assert err.value.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert leader.log.log_end_offset == 3 and leader.state.ongoing_txns == {5: 2}
    leader.append(marker(5, 2, commit=False, coordinator_epoch=4))  # the same epoch may
    entry = leader.state.last_entry(5)
    assert entry is not None and entry.coordinator_epoch == 4


def test_a_producer_with_an_open_transaction_does_not_expire(leader: Leader) -> None:
    leader.append(data(5, 0))
    leader.append(data(6, 0, txn=False))
    leader.clock.advance(leader.state.producer_id_expiration_ms + 1)
    assert leader.state.remove_expired(leader.clock.time_ms()) == 1
    assert set(leader.state.producers) == {5} and leader.lso == 0


def test_a_clean_restart_keeps_open_transactions_in_the_snapshot(leader: Leader) -> None:
    leader.append(data(5, 0, count=2))  # 0-1 open
    leader.append(data(6, 0))  # 2 open
    leader.append(marker(6, 1, commit=False))  # 3
    leader.restart(clean=True)
    [snap] = list_snapshots(leader.log.dir)
    by_pid = {e.producer_id: e for e in read_snapshot(leader.log.dir, snap)}
    assert by_pid[5].current_txn_first_offset == 0 and by_pid[6].current_txn_first_offset == -1
    assert by_pid[6].coordinator_epoch == 0
    assert leader.state.ongoing_txns == {5: 0} and leader.lso == 0
    assert leader.log.collect_aborted_txns(0, 4) == [AbortedTxn(6, 2, 3, 0)]


def test_recovery_rebuilds_open_transactions_and_the_txn_index(leader: Leader) -> None:
    leader.append(data(5, 0, count=2))  # 0-1
    leader.log.roll()  # a snapshot at 2 with producer 5 open
    leader.append(data(6, 0))  # 2
    leader.append(marker(5, 1, commit=False))  # 3
    leader.log.roll()
    leader.append(data(7, 0))  # 4
    leader.append(marker(6, 1, commit=False))  # 5
    index_files = sorted(p.name for p in leader.log.dir.glob("*.txnindex"))
    assert len(index_files) == 2
    leader.restart(clean=False)
    assert leader.state.ongoing_txns == {7: 4} and leader.lso == 4
    assert leader.log.collect_aborted_txns(0, 6) == [
        AbortedTxn(5, 0, 3, 2),
        AbortedTxn(6, 2, 5, 4),
    ]
    assert sorted(p.name for p in leader.log.dir.glob("*.txnindex")) == index_files
    leader.restart(clean=False)  # again: rebuilt, not doubled
    assert [len(s.txn_index.entries) for s in leader.log.segments] == [0, 1, 1]


def test_truncation_drops_the_index_entries_and_reopens_the_transaction(
    leader: Leader,
) -> None:
    leader.append(data(5, 0, count=2))  # 0-1
    leader.append(marker(5, 1, commit=False))  # 2
    leader.log.truncate_to(2)
    leader.state.truncate_to(2)
    assert leader.log.collect_aborted_txns(0, 10) == []
    assert leader.state.ongoing_txns == {5: 0}
    assert leader.state.last_stable_offset(2) == 0


def test_retention_never_passes_an_open_transaction(tmp_path: Path) -> None:
    leader = Leader(tmp_path, ManualClock(TS), **{"retention.ms": "1000"})
    leader.append(data(1, 0, count=2, txn=False))  # 0-1
    leader.log.roll()
    leader.append(data(5, 0))  # 2, open
    leader.log.roll()
    leader.append(data(1, 2, txn=False))  # 3
    leader.log.roll()
    leader.append(data(1, 3, txn=False))  # 4, active segment
    leader.clock.advance(10_000)
    assert leader.log.apply_retention(leader.clock.time_ms()) == 1  # only [0, 2)
    assert leader.log.log_start_offset == 2 and leader.lso == 2
    leader.append(marker(5, 1, commit=True))  # 5
    assert leader.log.apply_retention(leader.clock.time_ms()) == 2
    assert leader.log.log_start_offset == 4


def test_a_follower_tracks_the_same_transactions_from_the_leaders_batches(
    tmp_path: Path,
) -> None:
    leader = Leader(tmp_path / "leader", ManualClock())
    leader.append(data(5, 0, count=2))  # 0-1
    leader.append(data(6, 0))  # 2
    leader.append(marker(5, 1, commit=False))  # 3
    follower = Leader(tmp_path / "follower", ManualClock())
    for segment in leader.log.segments:
        payload = segment.log.read(0, segment.size)
        follower.log.append_as_follower(payload)
        follower.state.on_follower_append(payload)
    follower.log.high_watermark = 4
    assert follower.state.ongoing_txns == {6: 2} and follower.lso == 2
    assert follower.log.collect_aborted_txns(0, 4) == leader.log.collect_aborted_txns(0, 4)
    assert follower.log.collect_aborted_txns(0, 4) == [AbortedTxn(5, 0, 3, 2)]
