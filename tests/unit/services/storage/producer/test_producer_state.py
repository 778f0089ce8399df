"""ProducerStateManager: duplicates answered with the original offsets, gaps and old epochs
refused, snapshots round trip (a corrupt one ignored and the state rebuilt from the log),
replay, truncation and expiry."""

from __future__ import annotations

from pathlib import Path

import pytest

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import AppendInfo, LogConfig, PartitionLog
from riverlog.services.storage.producer import ProducerStateManager
from riverlog.services.storage.producer.entry import BATCH_RETAIN
from riverlog.services.storage.producer.snapshot import (
    decode,
    encode,
    list_snapshots,
    snapshot_path,
)

TP = TopicPartition("orders", 0)
PID = 4000


def batch(seq: int, count: int = 1, pid: int = PID, epoch: int = 0, ts: int = 0) -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE, producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )
    for i in range(count):
        builder.append(ts or 1_700_000_000_000, b"k", b"v%d" % (seq + i))
    return builder.build()


def plain(count: int = 1) -> bytes:
    builder = BatchBuilder(CompressionType.NONE)
    for _ in range(count):
        builder.append(1_700_000_000_000, None, b"x")
    return builder.build()


class Replica:
    """A log and its producer state, appended to as the leader's Partition does."""

    def __init__(self, path: Path, clock: ManualClock, **config: str) -> None:
        self.path, self.clock, self.config = path, clock, LogConfig.from_overrides(config)
        self.open()

    def open(self) -> None:
        self.log = PartitionLog.open(self.path / str(TP), TP, self.config, self.clock)
        self.state = ProducerStateManager(self.log, self.clock)

    def append(self, payload: bytes) -> AppendInfo:
        check = self.state.check_leader_append(payload)
        if check.duplicate is not None:
            return self.state.duplicate_info(check.duplicate)
        info = self.log.append_as_leader(payload, 0)
        self.state.on_leader_append(check, info)
        self.log.high_watermark = self.log.log_end_offset
        return info

    def restart(self, clean: bool = True) -> None:
        if clean:
            self.log.close()
        else:  # kill -9: nothing flushed, no snapshot at close
            for segment in self.log.segments:
                segment.log.close()
        self.open()


@pytest.fixture
def replica(tmp_path: Path, clock: ManualClock) -> Replica:
    return Replica(tmp_path, clock)


def test_sequences_in_order_are_appended(replica: Replica) -> None:
    assert replica.append(batch(0, 3)).first_offset == 0
    assert replica.append(batch(3, 2)).first_offset == 3
    entry = replica.state.last_entry(PID)
    assert entry is not None and entry.last_seq == 4 and entry.producer_epoch == 0


@pytest.mark.parametrize("retried", [0, 1, BATCH_RETAIN // 2, BATCH_RETAIN - 1])
def test_a_duplicate_of_the_remembered_batches_gets_the_original_offsets(
    replica: Replica, retried: int
) -> None:
    infos = [replica.append(batch(seq * 2, 2)) for seq in range(BATCH_RETAIN + 1)]  # of 2 each
    end = replica.log.log_end_offset
    again = replica.append(batch((retried + 1) * 2, 2))  # one of the remembered ones
    assert (again.first_offset, again.last_offset) == (
        infos[retried + 1].first_offset,
        infos[retried + 1].last_offset,
    )
    assert replica.log.log_end_offset == end  # nothing written


def test_a_retry_older_than_the_remembered_batches_is_out_of_order(replica: Replica) -> None:
    for seq in range(BATCH_RETAIN + 1):
        replica.append(batch(seq))
    with pytest.raises(RiverlogError) as err:
        replica.append(batch(0))
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_gap_is_refused_and_nothing_written(replica: Replica) -> None:
    replica.append(batch(0, 2))
    with pytest.raises(RiverlogError) as err:
        replica.append(batch(5))
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert replica.log.log_end_offset == 2


def test_an_older_epoch_is_refused(replica: Replica) -> None:
    replica.append(batch(0, epoch=3))
    with pytest.raises(RiverlogError) as err:
        replica.append(batch(1, epoch=2))
    assert err.value.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_new_epoch_starts_at_zero(replica: Replica) -> None:
    replica.append(batch(0, 5))
    with pytest.raises(RiverlogError) as err:
        replica.append(batch(5, epoch=1))
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert replica.append(batch(0, epoch=1)).first_offset == 5


def test_an_unknown_producer_may_start_anywhere(replica: Replica) -> None:
    """Kafka 2.5+ (KIP-360): no UNKNOWN_PRODUCER_ID for a producer whose state is gone."""
    assert replica.append(batch(42)).first_offset == 0
    with pytest.raises(RiverlogError):
        replica.append(batch(44))


def test_batches_in_one_payload_follow_each_other(replica: Replica) -> None:
    info = replica.append(batch(0, 2) + batch(2, 3) + plain())
    assert (info.first_offset, info.last_offset) == (0, 5)
    with pytest.raises(RiverlogError) as err:
        replica.append(batch(5) + batch(7))
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert replica.log.log_end_offset == 6


def test_a_payload_mixing_a_retry_and_new_batches_is_refused(replica: Replica) -> None:
    replica.append(batch(0))
    with pytest.raises(RiverlogError) as err:
        replica.append(batch(0) + batch(1))
    assert err.value.code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER


def test_batches_without_producer_id_are_not_checked(replica: Replica) -> None:
    replica.append(plain())
    replica.append(plain())
    assert replica.state.producers == {}


def test_snapshot_round_trip(replica: Replica) -> None:
    for i in range(7):
        replica.append(batch(i // 2, pid=PID + i % 2))
    data = encode(replica.state.producers.values())
    decoded = {e.producer_id: e for e in decode(data)}
    assert decoded == dict(replica.state.producers)


def test_state_survives_a_clean_restart_through_the_snapshot(replica: Replica) -> None:
    for seq in range(3):
        replica.append(batch(seq))
    replica.restart(clean=True)
    assert list_snapshots(replica.log.dir) == [3]
    again = replica.append(batch(1))
    assert again.first_offset == 1 and replica.log.log_end_offset == 3


def test_state_survives_kill_9_by_replay_from_the_log(replica: Replica) -> None:
    for seq in range(3):
        replica.append(batch(seq))
    replica.restart(clean=False)
    assert replica.append(batch(2)).first_offset == 2
    with pytest.raises(RiverlogError):
        replica.append(batch(9))


def test_snapshots_at_roll_and_replay_from_the_latest(tmp_path: Path, clock: ManualClock) -> None:
    replica = Replica(tmp_path, clock, **{"segment.bytes": "300"})
    for seq in range(12):
        replica.append(batch(seq))
    snaps = list_snapshots(replica.log.dir)
    assert snaps and snaps[-1] == replica.log.active_segment.base_offset
    replica.restart(clean=False)
    assert replica.append(batch(11)).first_offset == 11
    assert replica.append(batch(12)).first_offset == 12


def test_a_corrupt_snapshot_is_ignored_and_the_state_rebuilt(replica: Replica) -> None:
    for seq in range(4):
        replica.append(batch(seq))
    replica.log.close()
    path = snapshot_path(replica.log.dir, 4)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    replica.open()
    assert not path.exists()
    assert replica.append(batch(3)).first_offset == 3  # still a duplicate: rebuilt from the log
    assert replica.append(batch(4)).first_offset == 4


def test_snapshots_above_the_log_end_are_deleted(replica: Replica) -> None:
    replica.append(batch(0))
    replica.state.take_snapshot()
    replica.log.close()
    snapshot_path(replica.log.dir, 1).rename(snapshot_path(replica.log.dir, 50))
    replica.open()
    assert list_snapshots(replica.log.dir) == []


def test_truncation_rebuilds_from_the_nearest_snapshot(tmp_path: Path, clock: ManualClock) -> None:
    replica = Replica(tmp_path, clock, **{"segment.bytes": "300"})
    for seq in range(12):
        replica.append(batch(seq))
    replica.log.truncate_to(5)
    replica.state.truncate_to(5)
    assert all(o <= 5 for o in list_snapshots(replica.log.dir))
    entry = replica.state.last_entry(PID)
    assert entry is not None and entry.last_seq == 4
    assert replica.append(batch(5)).first_offset == 5


def test_truncate_fully_forgets_every_producer(replica: Replica) -> None:
    replica.append(batch(0))
    replica.state.take_snapshot()
    replica.log.truncate_fully_and_start_at(10)
    replica.state.truncate_fully_and_start_at(10)
    assert replica.state.producers == {} and list_snapshots(replica.log.dir) == []
    assert replica.append(batch(7)).first_offset == 10


def test_follower_appends_update_the_state(tmp_path: Path, clock: ManualClock) -> None:
    leader = Replica(tmp_path / "leader", clock)
    leader.append(batch(0, 2))
    leader.append(batch(2, 2))
    follower = Replica(tmp_path / "follower", clock)
    with leader.log.read(0, 1 << 20) as fetched:
        data = fetched.to_bytes()
    follower.log.append_as_follower(data)
    follower.state.on_follower_append(data)
    assert follower.state.map_end_offset == 4
    assert follower.append(batch(2, 2)).first_offset == 2


def test_expired_producers_are_forgotten(tmp_path: Path, clock: ManualClock) -> None:
    replica = Replica(tmp_path, clock)
    replica.state.producer_id_expiration_ms = 1000
    replica.append(batch(0, ts=clock.time_ms()))
    assert replica.state.remove_expired(clock.time_ms() + 999) == 0
    assert replica.state.remove_expired(clock.time_ms() + 1000) == 1
    assert replica.state.last_entry(PID) is None
    assert replica.append(batch(9, ts=clock.time_ms())).first_offset == 1


def test_expiry_runs_on_the_append_path(tmp_path: Path, clock: ManualClock) -> None:
    replica = Replica(tmp_path, clock)
    replica.state.producer_id_expiration_ms = 1000
    replica.append(batch(0, ts=clock.time_ms()))
    clock.advance(700_000)  # past the 10-minute check interval and the expiration
    replica.append(batch(5, pid=PID + 1, ts=clock.time_ms()))
    assert replica.state.last_entry(PID) is None


def test_snapshots_below_the_first_segment_are_deleted(tmp_path: Path, clock: ManualClock) -> None:
    replica = Replica(tmp_path, clock, **{"segment.bytes": "300"})
    for seq in range(12):
        replica.append(batch(seq))
    before = list_snapshots(replica.log.dir)
    assert len(before) >= 2
    replica.log.delete_records(replica.log.active_segment.base_offset)
    replica.append(batch(12))
    replica.log.roll()
    first = replica.log.segments[0].base_offset
    after = list_snapshots(replica.log.dir)
    assert after and all(offset >= first for offset in after)
    assert after[-1] == replica.log.log_end_offset


def test_a_new_manager_replaces_the_old_one_on_the_log(replica: Replica) -> None:
    replica.append(batch(0))
    old = replica.state
    replica.state = ProducerStateManager(replica.log, replica.clock)
    assert len(replica.log.on_roll) == len(replica.log.on_close) == 1
    assert replica.state is not old and replica.state.last_entry(PID) is not None
