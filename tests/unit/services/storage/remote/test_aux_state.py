"""A follower's start below its leader's local log start (aux_state.py): the remote segment
holding the offset just below it gives the start, the leader epochs and the producer snapshot;
installed on an empty log, the producer state knows every producer the leader knew (a retried
batch is a duplicate, a sequence gap is refused)."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_log_testkit import TP, open_log, read_bytes
from tiered_testkit import manager, tiered

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.builder import BatchBuilder
from riverlog.services.storage.producer.manager import ProducerStateManager
from riverlog.services.storage.remote.aux_state import (
    fetch_aux_state,
    merged_epochs,
    parse_epoch_checkpoint,
)
from riverlog.services.storage.remote.metadata_manager import RemoteLogMetadataManager
from riverlog.services.storage.remote.remote_log_manager import PartitionTask, checkpoint_bytes
from riverlog.services.storage.remote.segment_metadata import RemoteLogSegmentMetadata
from riverlog.services.storage.remote.storage import RemoteLogSegmentId

PID = 4242


def batch(seq: int, ts: int) -> bytes:
    builder = BatchBuilder(producer_id=PID, producer_epoch=0, base_sequence=seq)
    for i in range(2):
        builder.append(ts + i, b"k", b"v" * 40)
    return builder.build()


def segment(start: int, end: int, epochs: dict[int, int]) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata.copy_started(
        RemoteLogSegmentId(TP, f"s{start}"), start, end, 0, epochs, 100, 0, 0
    )


def test_the_checkpoint_parses_and_the_epochs_merge_in_order() -> None:
    assert parse_epoch_checkpoint(checkpoint_bytes({2: 50, 5: 120})) == [(2, 50), (5, 120)]
    with pytest.raises(ValueError):
        parse_epoch_checkpoint(b"1\n1\n0 0\n")
    remote = [segment(0, 49, {0: 0, 1: 30}), segment(50, 129, {1: 50, 3: 90})]
    # The checkpoint of the segment holding the start repeats what the metadata says; epochs
    # at or past the next offset are left out; a newer epoch starting earlier wins.
    assert merged_epochs(remote, [(1, 50), (3, 90), (4, 130)], 130) == ((0, 0), (1, 30), (3, 90))
    assert merged_epochs([segment(0, 9, {0: 0, 2: 5})], [(1, 7)], 10) == ((0, 0), (2, 5))


async def test_a_follower_starts_with_the_leaders_producers_and_epochs(
    tmp_path: Path, clock: ManualClock
) -> None:
    plog = open_log(tmp_path / "leader", clock, tiered())
    state = ProducerStateManager(plog, clock)
    plog.leader_epoch_cache.assign(0, 0)
    now = clock.time_ms()
    for seq in range(0, 24, 2):
        if seq == 12:
            plog.leader_epoch_cache.assign(3, plog.log_end_offset)
        check = state.check_leader_append(batch(seq, now))
        info = plog.append_as_leader(batch(seq, now), 3 if seq >= 12 else 0)
        state.on_leader_append(check, info)
        plog.high_watermark = plog.log_end_offset
    assert plog.segment_count > 3
    rlm = manager(tmp_path / "tier", clock)
    await rlm.run_once(PartitionTask(plog, 3))
    assert plog.apply_retention(clock.time_ms()) > 0
    local_start = plog.local_log_start_offset
    assert local_start > 12

    # A fresh replica (another node: its own metadata manager) asks what lies below.
    aux = await fetch_aux_state(RemoteLogMetadataManager(rlm.store), rlm.store, TP, local_start)
    assert aux is not None and aux.next_offset == local_start
    assert aux.epochs == ((0, 0), (3, 12))
    assert aux.producer_snapshot is not None
    # Nothing remote below offset 0: no state to take.
    assert await fetch_aux_state(RemoteLogMetadataManager(rlm.store), rlm.store, TP, 0) is None

    follower = open_log(tmp_path / "follower", clock, tiered())
    follower_state = ProducerStateManager(follower, clock)
    follower.truncate_fully_and_start_at(aux.next_offset)
    follower_state.truncate_fully_and_start_at(aux.next_offset)
    for epoch, start in aux.epochs:
        follower.leader_epoch_cache.assign(epoch, start)
    follower_state.install_snapshot(aux.next_offset, aux.producer_snapshot)

    # Then it copies the leader's local tail, as a follower does.
    tail = read_bytes(plog, local_start)
    follower.append_as_follower(tail)
    follower_state.on_follower_append(tail)
    entry = follower_state.last_entry(PID)
    assert entry is not None and entry == state.last_entry(PID)
    assert follower.leader_epoch_cache.end_offset_for(0, follower.log_end_offset) == (0, 12)
    # The producer's last batch again is a duplicate; one with a gap is refused.
    assert follower_state.check_leader_append(batch(22, now)).duplicate is not None
    with pytest.raises(RiverlogError) as err:
        follower_state.check_leader_append(batch(30, now))
    assert err.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert follower_state.check_leader_append(batch(24, now)).duplicate is None
