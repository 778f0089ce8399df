"""The leader's copy-and-expire task (remote_log_manager.py) on a real partition log in a
temporary directory and the directory store, one round at a time with a manual clock: closed
segments below the high watermark are copied with their indexes, snapshot and epochs; local
segments go only once copied; a store that is down keeps the local data; a new leader cleans up
an interrupted copy and fences the old one; remote segments expire by the total retention."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from storage_log_testkit import TP, open_log, read_bytes
from tiered_testkit import manager, tiered

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.storage.log import LogConfig, PartitionLog
from riverlog.services.storage.remote.directory import DirectoryRemoteStorage
from riverlog.services.storage.remote.metadata_manager import RemoteLogMetadataManager
from riverlog.services.storage.remote.remote_log_manager import (
    PartitionTask,
    RemoteLogManager,
    checkpoint_bytes,
    epoch_checkpoint_slice,
)
from riverlog.services.storage.remote.segment_metadata import RemoteLogSegmentState
from riverlog.services.storage.remote.storage import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteStorageError,
)
from riverlog.services.storage.remote_log_config import RemoteLogConfig

S = RemoteLogSegmentState


def test_the_epoch_slice_of_a_segment() -> None:
    entries = [(0, 0), (2, 50), (5, 120)]
    assert epoch_checkpoint_slice(entries, 10, 40) == {0: 10}
    assert epoch_checkpoint_slice(entries, 40, 130) == {0: 40, 2: 50, 5: 120}
    assert epoch_checkpoint_slice(entries, 50, 120) == {2: 50}
    assert checkpoint_bytes({2: 50, 5: 120}) == b"0\n2\n2 50\n5 120\n"


async def test_closed_segments_are_copied_then_deleted_locally_with_the_same_bytes(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog
) -> None:
    closed = plog.segments[:-1]
    expected = {s.base_offset: s.log.path.read_bytes() for s in closed}
    time_indexes = {s.base_offset: s.time_index.path.read_bytes() for s in closed}
    whole = read_bytes(plog, 0)
    rlm = manager(tmp_path / "tier", clock)
    await rlm.run_once(PartitionTask(plog, 3))
    state = rlm.metadata.state(TP)
    assert state is not None
    remote = state.readable_segments()
    assert [s.start_offset for s in remote] == sorted(expected)
    for segment in remote:
        data = await rlm.store.fetch_log_segment(segment.segment_id, 0)
        assert data == expected[segment.start_offset]
        assert segment.segment_size_bytes == len(data)
        assert segment.segment_leader_epochs == {0: segment.start_offset}
        epochs = await rlm.store.fetch_index(segment.segment_id, IndexType.LEADER_EPOCH)
        assert epochs == checkpoint_bytes({0: segment.start_offset})
        time_index = await rlm.store.fetch_index(segment.segment_id, IndexType.TIMESTAMP)
        assert time_index == time_indexes[segment.start_offset] and time_index
    assert (
        b"".join(expected[s.start_offset] for s in remote)
        == whole[: sum(map(len, expected.values()))]
    )
    assert plog.copied_next_offset == plog.active_segment.base_offset
    assert plog.remote_size_bytes == sum(map(len, expected.values()))
    assert rlm.segments_copied == len(closed)

    assert plog.apply_retention(clock.time_ms()) == len(closed)
    assert plog.log_start_offset == 0  # still readable, remotely
    assert plog.local_log_start_offset == plog.active_segment.base_offset
    with pytest.raises(RiverlogError) as err:
        plog.read(0, 1000)
    assert err.value.code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE
    # A second round has nothing to copy.
    await rlm.run_once(PartitionTask(plog, 3, epoch_started=True))
    assert rlm.segments_copied == len(closed)


async def test_nothing_above_the_high_watermark_or_an_open_transaction_is_copied(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog
) -> None:
    third = plog.segments[2].base_offset
    plog.high_watermark = third + 1  # inside the third segment
    rlm = manager(tmp_path / "tier", clock)
    await rlm.run_once(PartitionTask(plog, 1))
    assert plog.copied_next_offset == third
    plog.high_watermark = plog.log_end_offset
    plog.first_unstable_offset = lambda: plog.segments[3].base_offset
    await rlm.run_once(PartitionTask(plog, 1, epoch_started=True))
    assert plog.copied_next_offset == plog.segments[3].base_offset


async def test_a_store_that_is_down_keeps_local_data_until_the_copy_succeeds(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog
) -> None:
    root = tmp_path / "tier"
    root.write_bytes(b"the mount is gone")
    rlm = manager(root, clock)
    count = plog.segment_count
    with pytest.raises(RemoteStorageError):
        await rlm.run_once(PartitionTask(plog, 1))
    assert plog.apply_retention(clock.time_ms()) == 0  # local.retention.bytes=0, nothing copied
    assert plog.segment_count == count and read_bytes(plog, 0)
    root.unlink()  # the store is back
    await rlm.run_once(PartitionTask(plog, 1))
    assert plog.apply_retention(clock.time_ms()) == count - 1


async def test_the_loop_backs_off_while_the_store_is_down_and_copies_when_it_is_back(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog
) -> None:
    root = tmp_path / "tier"
    root.write_bytes(b"down")
    config = RemoteLogConfig(task_interval_ms=10, retry_backoff_ms=5, retry_backoff_max_ms=20)
    rlm = RemoteLogManager(config, DirectoryRemoteStorage(root), clock)
    rlm.on_leader(plog, 1)
    try:
        for _ in range(500):
            if rlm.copy_failures >= 3:
                break
            await asyncio.sleep(0.01)
        assert rlm.copy_failures >= 3 and plog.copied_next_offset is None
        root.unlink()
        for _ in range(1000):
            if plog.copied_next_offset == plog.active_segment.base_offset:
                break
            await asyncio.sleep(0.01)
        assert plog.copied_next_offset == plog.active_segment.base_offset
    finally:
        await rlm.stop()
    assert not rlm.leads(TP)


async def test_a_new_leader_removes_the_interrupted_copy_and_fences_the_old_one(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog
) -> None:
    store = DirectoryRemoteStorage(tmp_path / "tier")
    old = RemoteLogManager(RemoteLogConfig(), store, clock)
    # The old leader copies the first segments, then dies after COPY_SEGMENT_STARTED of the
    # next one with half of its objects written.
    plog.high_watermark = plog.segments[2].base_offset
    await old.run_once(PartitionTask(plog, 1))
    plog.high_watermark = plog.log_end_offset
    started = await _start_copy_and_die(old, plog)

    new = RemoteLogManager(RemoteLogConfig(), store, clock)
    await new.run_once(PartitionTask(plog, 2))
    state = new.metadata.state(TP)
    assert state is not None and started not in state.segments  # cleaned up
    assert not [n for n in await store.list_objects(f"{TP}/") if started in n]
    starts = [s.start_offset for s in state.readable_segments()]
    assert starts == [s.base_offset for s in plog.segments[:-1]]  # nothing twice, no hole
    with pytest.raises(RiverlogError) as err:
        await old.run_once(PartitionTask(plog, 1, epoch_started=True))
    assert err.value.code == ErrorCode.FENCED_LEADER_EPOCH


async def _start_copy_and_die(rlm: RemoteLogManager, plog: PartitionLog) -> str:
    from riverlog.services.storage.remote.segment_metadata import RemoteLogSegmentMetadata
    from riverlog.services.storage.remote.storage import RemoteLogSegmentId

    segment = plog.segments[2]
    seg_id = RemoteLogSegmentId.generate(TP)
    meta = RemoteLogSegmentMetadata.copy_started(
        seg_id, segment.base_offset, segment.next_offset - 1, 0, {0: segment.base_offset}, 1, 1, 0
    )
    await rlm.metadata.add(meta)
    assert await rlm.store.put_if_absent(seg_id.object_name(".index"), b"partial")
    return seg_id.id


async def test_remote_segments_expire_by_total_retention_and_move_the_log_start(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog
) -> None:
    rlm = manager(tmp_path / "tier", clock)
    await rlm.run_once(PartitionTask(plog, 1))
    plog.apply_retention(clock.time_ms())
    state = rlm.metadata.state(TP)
    assert state is not None
    remote = state.readable_segments()
    keep = remote[-1].segment_size_bytes + plog.size_bytes
    plog.update_config(tiered(**{"retention.bytes": keep}))
    await rlm.run_once(PartitionTask(plog, 1, epoch_started=True))
    state = rlm.metadata.state(TP)
    assert state is not None
    assert [s.segment_id for s in state.readable_segments()] == [remote[-1].segment_id]
    assert plog.log_start_offset == remote[-1].start_offset
    for gone in remote[:-1]:
        assert not [n for n in await rlm.store.list_objects(f"{TP}/") if gone.segment_id.id in n]
    # A reader loading the metadata afresh agrees.
    fresh = await RemoteLogMetadataManager(rlm.store).load(TP)
    assert [s.start_offset for s in fresh.readable_segments()] == [remote[-1].start_offset]


async def test_delete_records_below_the_local_start_deletes_the_remote_segments_at_once(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog
) -> None:
    """DeleteRecords moves the log start at once and wakes the leader's task: the remote
    segments wholly below the new start go without waiting for the task interval (an hour
    here, so only the wake can run the round)."""
    config = RemoteLogConfig(task_interval_ms=3_600_000)
    rlm = RemoteLogManager(config, DirectoryRemoteStorage(tmp_path / "tier"), clock)
    rlm.on_leader(plog, 1)
    try:

        async def copied() -> None:
            while plog.copied_next_offset != plog.active_segment.base_offset:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(copied(), 30)
        plog.apply_retention(clock.time_ms())
        state = rlm.metadata.state(TP)
        assert state is not None
        remote = state.readable_segments()
        target = remote[2].start_offset + 1  # inside the third remote segment
        assert plog.delete_records(target) == target
        assert plog.log_start_offset == target  # at once, before any remote delete
        with pytest.raises(RiverlogError) as err:
            plog.read(0, 1000)
        assert err.value.code == ErrorCode.OFFSET_OUT_OF_RANGE

        async def deleted() -> list[str]:
            while True:
                meta = rlm.metadata.state(TP)
                assert meta is not None
                gone = {s.segment_id.id for s in remote[:2]}.isdisjoint(meta.segments)
                if gone:  # DELETE_SEGMENT_FINISHED: the objects went before
                    return await rlm.store.list_objects(f"{TP}/")
                await asyncio.sleep(0.01)

        names = await asyncio.wait_for(deleted(), 30)
        for gone in remote[:2]:
            assert not [n for n in names if gone.segment_id.id in n]
        assert [n for n in names if remote[2].segment_id.id in n]
    finally:
        await rlm.stop()
    assert plog.on_log_start_moved == []  # no task, no hook


async def test_a_reopened_tiered_log_keeps_its_log_start_below_the_local_one(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog
) -> None:
    await manager(tmp_path / "tier", clock).run_once(PartitionTask(plog, 1))
    plog.apply_retention(clock.time_ms())
    local_start = plog.local_log_start_offset
    assert local_start > 0
    plog.close()
    again = open_log(tmp_path / "data", clock, tiered(), log_start_offset=0, clean_shutdown=True)
    assert (again.log_start_offset, again.local_log_start_offset) == (0, local_start)
    with pytest.raises(RiverlogError) as err:
        again.read(local_start - 1, 100)
    assert err.value.code == ErrorCode.OFFSET_MOVED_TO_TIERED_STORAGE
    assert read_bytes(again, local_start)


async def test_a_log_loaded_before_its_topic_config_takes_back_its_tiered_log_start(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog
) -> None:
    """A node restarting loads logs with its defaults (the topic configs come with the first
    metadata image): the start is clamped to the first local segment until the config says
    the topic is tiered, then the checkpointed start is back."""
    await manager(tmp_path / "tier", clock).run_once(PartitionTask(plog, 1))
    plog.apply_retention(clock.time_ms())
    local_start = plog.local_log_start_offset
    plog.close()
    again = open_log(tmp_path / "data", clock, LogConfig(), log_start_offset=0, clean_shutdown=True)
    assert again.log_start_offset == local_start
    again.update_config(tiered())
    assert (again.log_start_offset, again.local_log_start_offset) == (0, local_start)
    again.update_config(tiered())  # only once: later changes keep the live start
    assert again.log_start_offset == 0


async def test_dump_log_reads_a_remote_segment_as_its_local_original(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog
) -> None:
    """`riverlog dump-log` on the objects of a remote segment (named by segment id, not base
    offset) prints what it prints for the local files they were copied from."""
    from riverlog.services.storage.dump import dump_segment

    segment = plog.segments[3]
    local = {s: segment.dir / f"{segment.base_offset:020d}{s}" for s in (".log", ".timeindex")}
    expected = {s: list(dump_segment(p))[1:] for s, p in local.items()}
    rlm = manager(tmp_path / "tier", clock)
    await rlm.run_once(PartitionTask(plog, 1))
    state = rlm.metadata.state(TP)
    assert state is not None
    remote = state.segment_for(segment.base_offset)
    assert remote is not None
    for suffix, lines in expected.items():
        path = tmp_path / "tier" / remote.segment_id.object_name(suffix)
        assert list(dump_segment(path))[1:] == lines


class SlowStore(DirectoryRemoteStorage):
    """A directory store whose segment copies wait in their worker thread until `release` is
    set (an upload in flight): like the real one's, a copy goes on when its caller is
    cancelled (a thread is not interrupted)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.copying = threading.Event()
        self.release = threading.Event()
        self.copied = threading.Event()

    def _copy(self, segment_id: RemoteLogSegmentId, data: LogSegmentData) -> None:
        self.copying.set()
        self.release.wait(30)
        try:
            super()._copy(segment_id, data)
        finally:
            self.copied.set()


async def _orphans(store: DirectoryRemoteStorage) -> list[str]:
    """Data objects whose segment the metadata does not name."""
    state = await RemoteLogMetadataManager(store).load(TP)
    live = set(state.segments)
    names = [n for n in await store.list_objects(f"{TP}/") if "/metadata/" not in n]
    return [n for n in names if n.split("/")[-1].split(".")[0] not in live]


async def _until(predicate: Callable[[], bool]) -> None:
    for _ in range(1000):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


@pytest.mark.parametrize("old_leader_hears_of_it", [True, False], ids=["moved", "zombie"])
async def test_a_copy_overtaken_by_a_new_leader_leaves_no_objects_once_it_ends(
    tmp_path: Path, clock: ManualClock, plog: PartitionLog, old_leader_hears_of_it: bool
) -> None:
    """The old leader is mid-copy (COPY_SEGMENT_STARTED written, objects in flight) when
    leadership moves with the old leader alive: the new leader cleans that attempt up and
    copies on. Told of the move, the old leader's task is cancelled; not told yet (a zombie),
    its COPY_SEGMENT_FINISHED is fenced. Either way its upload lands after the cleanup, and the
    old leader then deletes what it wrote: no orphan objects, nothing copied twice."""
    slow = SlowStore(tmp_path / "tier")
    old = RemoteLogManager(RemoteLogConfig(task_interval_ms=10), slow, clock)
    old.on_leader(plog, 1)
    await _until(slow.copying.is_set)
    if old_leader_hears_of_it:
        old.on_not_leader(TP)
    store = DirectoryRemoteStorage(tmp_path / "tier")
    new = RemoteLogManager(RemoteLogConfig(), store, clock)
    await new.run_once(PartitionTask(plog, 2))
    try:
        state = new.metadata.state(TP)
        assert state is not None and not state.in_state(S.COPY_SEGMENT_STARTED)
        starts = [s.start_offset for s in state.readable_segments()]
        assert starts == [s.base_offset for s in plog.segments[:-1]]
        slow.release.set()  # the old upload lands now, after the new leader's cleanup
        await _until(lambda: slow.copied.is_set() and not old.leads(TP) and not old._deletions)
    finally:
        slow.release.set()
        await old.stop()
    assert await _orphans(store) == []
