"""What the remote log metadata manager must do on any store, as coroutines taking the store:
run on the directory store by test_metadata_manager.py and on a real S3 server by
tests/integration/tiered. Two managers on one store are two leaders (or a leader and a
zombie) on two nodes."""

from __future__ import annotations

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.storage.remote.metadata_manager import (
    RemoteLogMetadataLostError,
    RemoteLogMetadataManager,
    metadata_prefix,
)
from riverlog.services.storage.remote.segment_metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from riverlog.services.storage.remote.storage import RemoteLogSegmentId, RemoteStorageManager

S = RemoteLogSegmentState


def started(tp: TopicPartition, start: int, end: int, epoch: int) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata.copy_started(
        RemoteLogSegmentId.generate(tp), start, end, 0, {epoch: start}, 100, epoch, 0
    )


async def a_new_leader_continues_where_the_old_one_stopped(store: RemoteStorageManager) -> None:
    tp = TopicPartition("continue", 0)
    old = RemoteLogMetadataManager(store)
    await old.start_epoch(tp, 1)
    a = started(tp, 0, 9, 1)
    await old.add(a)
    await old.update(a.transition_to(S.COPY_SEGMENT_FINISHED, 1, 0))
    b = started(tp, 10, 19, 1)
    await old.add(b)  # killed here, mid-upload

    new = RemoteLogMetadataManager(store)
    state = await new.start_epoch(tp, 2)
    assert state.leader_epoch == 2 and state.next_seq == 5
    assert state.copied_next_offset() == 10
    assert [s.segment_id for s in state.in_state(S.COPY_SEGMENT_STARTED)] == [b.segment_id]
    orphan = state.segments[b.segment_id.id].transition_to(S.DELETE_SEGMENT_STARTED, 2, 0)
    await new.update(orphan)
    state = await new.update(orphan.transition_to(S.DELETE_SEGMENT_FINISHED, 2, 0))
    assert [s.start_offset for s in state.readable_segments()] == [0]
    # A reader (a third node) sees the same.
    reader = RemoteLogMetadataManager(store)
    assert (await reader.load(tp)) == state


async def the_old_leader_is_fenced_once_the_new_one_started(store: RemoteStorageManager) -> None:
    tp = TopicPartition("fenced", 0)
    old, new = RemoteLogMetadataManager(store), RemoteLogMetadataManager(store)
    await old.start_epoch(tp, 1)
    a = started(tp, 0, 9, 1)
    await old.add(a)
    await new.start_epoch(tp, 2)
    with pytest.raises(RiverlogError, match="epoch 1 is fenced") as err:
        await old.update(a.transition_to(S.COPY_SEGMENT_FINISHED, 1, 0))
    assert err.value.code == ErrorCode.FENCED_LEADER_EPOCH
    with pytest.raises(RiverlogError, match="fenced"):
        await old.add(started(tp, 10, 19, 1))
    state = await RemoteLogMetadataManager(store).load(tp)
    assert state.readable_segments() == [] and state.leader_epoch == 2
    assert state.next_seq == 3  # the old leader's refused writes left nothing


async def writers_of_one_epoch_interleave_without_losing_records(
    store: RemoteStorageManager,
) -> None:
    """A manager whose view is stale (another instance wrote meanwhile) catches up and writes
    after, instead of overwriting."""
    tp = TopicPartition("race", 0)
    one, two = RemoteLogMetadataManager(store), RemoteLogMetadataManager(store)
    await one.start_epoch(tp, 3)
    await two.load(tp)
    a, b = started(tp, 0, 9, 3), started(tp, 10, 19, 3)
    await one.add(a)
    state = await two.add(b)  # seq 1 is taken: two reads it and writes at 2
    assert state.next_seq == 3 and set(state.segments) == {a.segment_id.id, b.segment_id.id}
    assert (await one.refresh(tp)) == state


async def deleting_a_partition_removes_data_and_metadata(store: RemoteStorageManager) -> None:
    tp = TopicPartition("gone", 1)
    other = TopicPartition("gone", 2)
    manager = RemoteLogMetadataManager(store)
    await manager.start_epoch(tp, 1)
    await manager.start_epoch(other, 1)
    await manager.add(started(tp, 0, 9, 1))
    assert await store.put_if_absent(f"{tp}/some-segment.log", b"data")
    assert await manager.delete_partition(tp) == 3
    assert await store.list_objects(f"{tp}/") == []
    assert await store.list_objects(f"{other}/") != []
    assert manager.state(tp) is None
    assert (await RemoteLogMetadataManager(store).load(tp)).next_seq == 0


async def lifecycle(
    manager: RemoteLogMetadataManager, tp: TopicPartition, start: int, epoch: int
) -> None:
    """One segment copied, then expired: four records."""
    segment = started(tp, start, start + 9, epoch)
    await manager.add(segment)
    finished = segment.transition_to(S.COPY_SEGMENT_FINISHED, epoch, 0)
    await manager.update(finished)
    deleting = finished.transition_to(S.DELETE_SEGMENT_STARTED, epoch, 0)
    await manager.update(deleting)
    await manager.update(deleting.transition_to(S.DELETE_SEGMENT_FINISHED, epoch, 0))


async def compaction_bounds_the_objects_and_keeps_the_state(
    store: RemoteStorageManager,
) -> None:
    """Many expired segments: the leader's compactions keep the metadata objects bounded; a
    replica loading afresh replays the same state from the snapshot, a follower that had read
    up to a compacted record catches up through its listing, and an older leader is still
    fenced after the records that fenced it are gone."""
    tp = TopicPartition("compacted", 0)
    leader, follower = RemoteLogMetadataManager(store), RemoteLogMetadataManager(store, 0.0)
    old = RemoteLogMetadataManager(store)
    await old.start_epoch(tp, 1)
    await leader.start_epoch(tp, 2)
    await follower.load(tp)
    for i in range(12):
        await lifecycle(leader, tp, 10 * i, 2)
        await leader.compact(tp, 2, 10)
    live = started(tp, 120, 129, 2)
    state = await leader.add(live)
    state = await leader.update(live.transition_to(S.COPY_SEGMENT_FINISHED, 2, 0))
    assert state.next_seq == 2 + 12 * 4 + 2
    names = await store.list_objects(f"{tp}/metadata/")
    assert len(names) <= 10 + 2  # records since the last snapshot, and the snapshot
    assert [n for n in names if "snapshot-" in n]
    assert await RemoteLogMetadataManager(store).load(tp) == state
    assert await follower.refresh(tp) == state  # seq 2 is long gone: it lists and reloads
    assert await leader.compact(tp, 1, 1) == 0  # not the newest epoch: no compaction
    with pytest.raises(RiverlogError) as err:
        await old.add(started(tp, 130, 139, 1))
    assert err.value.code == ErrorCode.FENCED_LEADER_EPOCH


async def a_log_that_lost_its_first_records_is_a_clear_error(store: RemoteStorageManager) -> None:
    """The store lost records that no snapshot covers (a bucket emptied, or recreated and
    written again): loading is a clear error naming the hole, not a replay of what is left
    (which would serve reads of the lost segments from a later one) nor endless listings; and
    the leader, which still has the state in memory, writes nothing more on top of the hole."""
    tp = TopicPartition("lost", 0)
    leader = RemoteLogMetadataManager(store)
    await leader.start_epoch(tp, 1)
    a = started(tp, 0, 9, 1)
    await leader.add(a)
    await leader.update(a.transition_to(S.COPY_SEGMENT_FINISHED, 1, 0))
    names = await store.list_objects(metadata_prefix(tp))
    await store.delete_objects(names[:2])  # lost: records 0 and 1; record 2 is left
    with pytest.raises(RemoteLogMetadataLostError, match=r"lost records 0\.\.1") as err:
        await RemoteLogMetadataManager(store).load(tp)
    assert err.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    with pytest.raises(RemoteLogMetadataLostError, match="lost its records below 2"):
        await leader.add(started(tp, 10, 19, 1))
    assert await store.list_objects(metadata_prefix(tp)) == names[2:]  # its record taken back


CASES = [
    a_new_leader_continues_where_the_old_one_stopped,
    the_old_leader_is_fenced_once_the_new_one_started,
    writers_of_one_epoch_interleave_without_losing_records,
    deleting_a_partition_removes_data_and_metadata,
    compaction_bounds_the_objects_and_keeps_the_state,
    a_log_that_lost_its_first_records_is_a_clear_error,
]
