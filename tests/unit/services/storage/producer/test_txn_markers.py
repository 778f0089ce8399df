"""Transaction markers at a partition leader: only the coordinator may append them, a marker
older than the producer's epoch is refused, the same marker again is a duplicate, and once the
bumped epoch's marker is written a late batch of the ended transaction is fenced (KIP-890)."""

from __future__ import annotations

from pathlib import Path

import pytest

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.records.control import (
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker,
    parse_end_txn_marker,
)
from riverlog.common.records.header import parse_header
from riverlog.common.records.reader import iter_batches_records
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import AppendInfo, AppendOrigin, LogConfig, PartitionLog
from riverlog.services.storage.producer import ProducerStateManager

pytestmark = pytest.mark.timeout(30)

TP = TopicPartition("orders", 0)
PID = 77
TS = 1_700_000_000_000


def txn_batch(seq: int, epoch: int, count: int = 1) -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE,
        producer_id=PID,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    for i in range(count):
        builder.append(TS, b"k", b"v%d" % (seq + i))
    return builder.build()


def marker(epoch: int, commit: bool = True, coordinator_epoch: int = 3) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_txn_marker(EndTxnMarker(kind, coordinator_epoch), PID, epoch, TS)


class Leader:
    def __init__(self, path: Path, clock: ManualClock) -> None:
        self.log = PartitionLog.open(path / str(TP), TP, LogConfig.from_overrides({}), clock)
        self.state = ProducerStateManager(self.log, clock)

    def append(self, payload: bytes, origin: AppendOrigin = AppendOrigin.CLIENT) -> AppendInfo:
        check = self.state.check_leader_append(payload)
        if check.duplicate is not None:
            return self.state.duplicate_info(check.duplicate)
        info = self.log.append_as_leader(payload, 0, origin)
        self.state.on_leader_append(check, info)
        return info


@pytest.fixture
def leader(tmp_path: Path) -> Leader:
    return Leader(tmp_path, ManualClock())


def test_a_marker_round_trips_with_kafkas_fields() -> None:
    data = marker(epoch=4, commit=False, coordinator_epoch=9)
    header = parse_header(data, 0)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (PID, 4, -1)
    assert parse_end_txn_marker(data) == EndTxnMarker(ControlRecordType.ABORT, 9)
    [record] = iter_batches_records(data, include_control=True)
    assert record.key == b"\x00\x00\x00\x00"  # version 0, type 0 (ABORT)
    assert record.value == b"\x00\x00\x00\x00\x00\x09"  # version 0, coordinator epoch 9
    assert list(iter_batches_records(data)) == []  # readers skip control batches


def test_clients_may_not_write_markers_and_the_coordinator_writes_nothing_else(
    leader: Leader,
) -> None:
    with pytest.raises(RiverlogError) as err:
        leader.append(marker(0))
    assert err.value.code == ErrorCode.INVALID_RECORD
    with pytest.raises(RiverlogError) as err:
        leader.append(txn_batch(0, 0), AppendOrigin.COORDINATOR)
    assert err.value.code == ErrorCode.INVALID_RECORD
    assert leader.log.log_end_offset == 0


def test_a_transaction_ends_with_its_marker_and_the_next_starts_at_sequence_zero(
    leader: Leader,
) -> None:
    leader.append(txn_batch(0, 0, 3))
    written = leader.append(marker(1), AppendOrigin.COORDINATOR)  # the end bumps the epoch
    assert written.first_offset == 3
    assert leader.append(txn_batch(0, 1, 2)).first_offset == 4
    again = leader.append(marker(1), AppendOrigin.COORDINATOR)  # the same marker, retried...
    assert leader.log.log_end_offset == 6  # ...is not written twice
    assert again.first_offset == written.first_offset == 3


def test_a_late_batch_of_the_ended_transaction_is_fenced(leader: Leader) -> None:
    leader.append(txn_batch(0, 0, 2))
    leader.append(marker(1, commit=False), AppendOrigin.COORDINATOR)
    with pytest.raises(RiverlogError) as err:
        leader.append(txn_batch(2, 0))  # the epoch-0 transaction is over
    assert err.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert leader.log.log_end_offset == 3


def test_a_marker_older_than_the_producer_is_refused(leader: Leader) -> None:
    leader.append(txn_batch(0, 5))
    with pytest.raises(RiverlogError) as err:
        leader.append(marker(4), AppendOrigin.COORDINATOR)
    assert err.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert leader.log.log_end_offset == 1
