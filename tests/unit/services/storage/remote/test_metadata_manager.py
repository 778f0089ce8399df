"""The remote log metadata manager on the directory store: the shared cases (rlmm_cases.py,
also run against a real S3 server), plus an illegal move refused before anything is written,
and the temporary file of a leader killed mid-write removed when the next leader starts."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from rlmm_cases import CASES, S, started

from riverlog.common.types import TopicPartition
from riverlog.services.storage.remote.directory import DirectoryRemoteStorage
from riverlog.services.storage.remote.metadata_manager import (
    RemoteLogMetadataManager,
    metadata_prefix,
)
from riverlog.services.storage.remote.segment_metadata import IllegalStateTransition
from riverlog.services.storage.remote.storage import RemoteStorageManager


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
async def test_contract(
    case: Callable[[RemoteStorageManager], Awaitable[None]], tmp_path: Path
) -> None:
    await case(DirectoryRemoteStorage(tmp_path))


async def test_an_illegal_move_writes_nothing(tmp_path: Path) -> None:
    store = DirectoryRemoteStorage(tmp_path)
    tp = TopicPartition("t", 0)
    manager = RemoteLogMetadataManager(store)
    await manager.start_epoch(tp, 1)
    a = started(tp, 0, 9, 1)
    await manager.add(a)
    with pytest.raises(IllegalStateTransition, match="cannot move from COPY_SEGMENT_STARTED"):
        await manager.update(dataclasses.replace(a, state=S.DELETE_SEGMENT_FINISHED))
    assert len(await store.list_objects(metadata_prefix(tp))) == 2


async def test_start_epoch_twice_writes_once(tmp_path: Path) -> None:
    store = DirectoryRemoteStorage(tmp_path)
    tp = TopicPartition("t", 0)
    manager = RemoteLogMetadataManager(store)
    await manager.start_epoch(tp, 4)
    await manager.start_epoch(tp, 4)
    assert len(await store.list_objects(metadata_prefix(tp))) == 1


# A leader's first metadata write (its EPOCH_START), killed with SIGKILL after the record's
# temporary file is written and fsynced, before it is linked to its name.
KILLED_WRITER = """
import asyncio, os, signal, sys
from pathlib import Path
from riverlog.common.types import TopicPartition
from riverlog.services.storage.remote.directory import DirectoryRemoteStorage
from riverlog.services.storage.remote.metadata_manager import RemoteLogMetadataManager

def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

os.link = killed
store = DirectoryRemoteStorage(Path(sys.argv[1]))
asyncio.run(RemoteLogMetadataManager(store).start_epoch(TopicPartition("t", 0), 1))
"""


async def test_the_next_leader_removes_what_a_killed_metadata_write_left(tmp_path: Path) -> None:
    tp = TopicPartition("t", 0)
    done = subprocess.run(
        [sys.executable, "-c", KILLED_WRITER, str(tmp_path)], capture_output=True, timeout=50
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    folder = tmp_path / metadata_prefix(tp)
    [left] = os.listdir(folder)
    assert left.startswith(".00000000000000000000.json.") and left.endswith(".tmp")
    store = DirectoryRemoteStorage(tmp_path)
    assert await store.list_objects(metadata_prefix(tp)) == []  # never an object

    # A follower reading the metadata leaves it (its writer could still be alive)...
    assert (await RemoteLogMetadataManager(store).load(tp)).leader_epoch == -1
    assert os.listdir(folder) == [left]
    # ...the next leader, which fences every earlier writer, removes it.
    state = await RemoteLogMetadataManager(store).start_epoch(tp, 2)
    assert state.leader_epoch == 2
    assert os.listdir(folder) == ["00000000000000000000.json"]
    assert await store.delete_incomplete_objects(metadata_prefix(tp)) == 0
