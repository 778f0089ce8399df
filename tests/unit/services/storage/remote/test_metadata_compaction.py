"""Compaction of the remote log metadata log (metadata_compaction.py): which objects a
snapshot supersedes, the snapshot's round trip, and a crash between the snapshot and the
deletes leaving a log that loads to the same state (the store-level case that bounds the
objects is in rlmm_cases.py, run here and against S3)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rlmm_cases import lifecycle, started

from riverlog.common.types import TopicPartition
from riverlog.services.storage.remote.directory import DirectoryRemoteStorage
from riverlog.services.storage.remote.metadata_compaction import (
    compaction_due,
    latest_snapshot,
    parse_names,
    snapshot_from_bytes,
    snapshot_to_bytes,
    superseded,
)
from riverlog.services.storage.remote.metadata_log import CorruptMetadataRecordError
from riverlog.services.storage.remote.metadata_manager import (
    RemoteLogMetadataManager,
    metadata_prefix,
    record_name,
    snapshot_name,
)

TP = TopicPartition("meta", 3)


def test_names_parse_and_a_snapshot_supersedes_everything_below_it() -> None:
    prefix = metadata_prefix(TP)
    names = [
        record_name(TP, 0),
        record_name(TP, 1),
        snapshot_name(TP, 2),
        record_name(TP, 2),
        snapshot_name(TP, 4),
        record_name(TP, 5),
        f"{prefix}00000000000000000006.json.tmp-1234",  # a kill's leftover: not an object
        f"{TP}/abc.log",
    ]
    objects = parse_names(prefix, names)
    assert [(o.seq, o.snapshot) for o in objects] == [
        (0, False),
        (1, False),
        (2, False),
        (2, True),
        (4, True),
        (5, False),
    ]
    newest = latest_snapshot(objects)
    assert newest is not None and newest.name == snapshot_name(TP, 4)
    assert sorted(superseded(objects, 4)) == sorted(names[:4])
    assert latest_snapshot(objects[:3]) is None
    assert compaction_due(110, 10, 100) and not compaction_due(109, 10, 100)


async def test_the_snapshot_round_trips_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    manager = RemoteLogMetadataManager(DirectoryRemoteStorage(tmp_path))
    await manager.start_epoch(TP, 4)
    await manager.add(started(TP, 0, 9, 4))
    state = await manager.add(started(TP, 10, 19, 4))
    assert snapshot_from_bytes(snapshot_to_bytes(state, 4)) == state
    with pytest.raises(CorruptMetadataRecordError):
        snapshot_from_bytes(b'{"leader_epoch": 1}')


async def test_a_crash_between_the_snapshot_and_the_deletes_leaves_a_readable_log(
    tmp_path: Path,
) -> None:
    store = DirectoryRemoteStorage(tmp_path)
    leader = RemoteLogMetadataManager(store)
    await leader.start_epoch(TP, 1)
    for i in range(3):
        await lifecycle(leader, TP, 10 * i, 1)
    state = leader.state(TP)
    assert state is not None
    # The compaction's first step only: the snapshot exists, every record is still there.
    assert await store.put_if_absent(snapshot_name(TP, state.next_seq), snapshot_to_bytes(state, 1))
    assert await RemoteLogMetadataManager(store).load(TP) == state
    # Half the deletes done.
    await store.delete_objects([record_name(TP, seq) for seq in range(0, 13, 2)])
    fresh = RemoteLogMetadataManager(store)
    assert await fresh.load(TP) == state
    # The next compaction of a new leader finishes the job.
    await fresh.start_epoch(TP, 2)
    await lifecycle(fresh, TP, 30, 2)
    assert await fresh.compact(TP, 2, 1) > 0
    names = await store.list_objects(metadata_prefix(TP))
    final = fresh.state(TP)
    assert final is not None and names == [snapshot_name(TP, final.next_seq)]
    assert await RemoteLogMetadataManager(store).load(TP) == final
