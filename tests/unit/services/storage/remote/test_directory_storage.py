"""The directory RemoteStorageManager: the shared cases (rsm_cases.py, also run against a real
S3 server), plus what only a directory shows: the layout under the prefix, no temporary file
left behind, and a failing disk surfacing as RemoteStorageError."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from rsm_cases import CASES, TP, segment_files

from riverlog.services.storage.remote.directory import DirectoryRemoteStorage
from riverlog.services.storage.remote.factory import remote_storage_manager
from riverlog.services.storage.remote.storage import (
    RemoteLogSegmentId,
    RemoteStorageError,
    RemoteStorageManager,
)
from riverlog.services.storage.remote_log_config import RemoteLogConfig


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.__name__)
async def test_contract(
    case: Callable[[RemoteStorageManager, Path], Awaitable[None]], tmp_path: Path
) -> None:
    await case(DirectoryRemoteStorage(tmp_path / "remote", "cluster-a"), tmp_path / "local")


async def test_layout_under_the_prefix_and_no_temporary_files(tmp_path: Path) -> None:
    store = DirectoryRemoteStorage(tmp_path / "remote", "/cluster-a/")
    seg = RemoteLogSegmentId.generate(TP)
    await store.copy_log_segment_data(seg, segment_files(tmp_path / "local"))
    names = sorted(p.name for p in (tmp_path / "remote" / "cluster-a" / "orders-3").iterdir())
    suffixes = [".index", ".leader-epoch-checkpoint", ".log", ".snapshot", ".timeindex"]
    assert names == sorted(seg.id + s for s in [*suffixes, ".txnindex"])


async def test_the_factory_builds_the_configured_directory(tmp_path: Path) -> None:
    config = RemoteLogConfig.from_overrides(
        {
            "remote.log.storage.system.enable": "true",
            "rsm.config.dir": str(tmp_path / "tier"),
            "rsm.config.prefix": "p",
        }
    )
    store = remote_storage_manager(config)
    assert isinstance(store, DirectoryRemoteStorage)
    assert store.root == tmp_path / "tier" / "p"


async def test_a_store_path_that_is_a_file_raises_remote_storage_error(tmp_path: Path) -> None:
    """Works as root too: the tier's root is a file, so no directory can be made under it."""
    (tmp_path / "remote").write_bytes(b"not a directory")
    store = DirectoryRemoteStorage(tmp_path / "remote")
    with pytest.raises(RemoteStorageError, match="copy of") as err:
        await store.copy_log_segment_data(
            RemoteLogSegmentId.generate(TP), segment_files(tmp_path / "local")
        )
    assert err.value.code.name == "KAFKA_STORAGE_ERROR"


async def test_delete_removes_what_a_killed_copy_left_under_temporary_names(
    tmp_path: Path,
) -> None:
    store = DirectoryRemoteStorage(tmp_path / "remote")
    seg = RemoteLogSegmentId.generate(TP)
    await store.copy_log_segment_data(seg, segment_files(tmp_path / "local"))
    folder = store.path_of(seg, "").parent
    (folder / f".{seg.id}.timeindex.{'0' * 32}.tmp").write_bytes(b"half")
    other = folder / ".someone-else.log.x.tmp"
    other.write_bytes(b"not ours")
    await store.delete_log_segment_data(seg)
    assert [p.name for p in folder.iterdir()] == [other.name]
