"""Fixtures of the tiered-storage unit tests: a partition log with remote.storage.enable and
small segments, filled on a manual clock, and a remote log manager on a directory store."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "log"))

from storage_log_testkit import fill, open_log

from riverlog.common.clock import ManualClock
from riverlog.services.storage.log import LogConfig, PartitionLog
from riverlog.services.storage.remote.directory import DirectoryRemoteStorage
from riverlog.services.storage.remote.remote_log_manager import RemoteLogManager
from riverlog.services.storage.remote_log_config import RemoteLogConfig


def tiered(**overrides: object) -> LogConfig:
    base = {"remote.storage.enable": "true", "segment.bytes": "300", "local.retention.bytes": "0"}
    return LogConfig.from_overrides({**base, **{k: str(v) for k, v in overrides.items()}})


def manager(root: Path, clock: ManualClock) -> RemoteLogManager:
    return RemoteLogManager(RemoteLogConfig(), DirectoryRemoteStorage(root), clock)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


@pytest.fixture
def plog(tmp_path: Path, clock: ManualClock) -> PartitionLog:
    log = open_log(tmp_path / "data", clock, tiered())
    fill(log, 20, clock=clock, value_size=40)  # ~100-byte batches, 300-byte segments
    assert log.segment_count > 4
    return log
