"""The remote log metadata manager on the directory store: the shared cases (rlmm_cases.py,
also run against a real S3 server), plus an illegal move refused before anything is written."""

from __future__ import annotations

import dataclasses
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
