"""Helpers of the tiered-storage unit tests: a tiered log config with small segments and a
remote log manager on a directory store (fixtures using them are in conftest.py)."""

from __future__ import annotations

from pathlib import Path

from riverlog.common.clock import ManualClock
from riverlog.services.storage.log import LogConfig
from riverlog.services.storage.remote.directory import DirectoryRemoteStorage
from riverlog.services.storage.remote.remote_log_manager import RemoteLogManager
from riverlog.services.storage.remote_log_config import RemoteLogConfig


def tiered(**overrides: object) -> LogConfig:
    base = {"remote.storage.enable": "true", "segment.bytes": "300", "local.retention.bytes": "0"}
    return LogConfig.from_overrides({**base, **{k: str(v) for k, v in overrides.items()}})


def manager(root: Path, clock: ManualClock) -> RemoteLogManager:
    return RemoteLogManager(RemoteLogConfig(), DirectoryRemoteStorage(root), clock)
