"""Builds the node's RemoteStorageManager from its tiering config
(`remote.log.storage.manager.class.name`), the one place that knows the implementations."""

from __future__ import annotations

from pathlib import Path

from ..remote_log_config import DIRECTORY, S3, RemoteLogConfig
from .directory import DirectoryRemoteStorage
from .storage import RemoteStorageManager


def remote_storage_manager(config: RemoteLogConfig) -> RemoteStorageManager:
    """The configured store; the config was checked at startup (required keys present)."""
    if config.class_name == DIRECTORY:
        return DirectoryRemoteStorage(Path(config.store["dir"]), config.store.get("prefix", ""))
    if config.class_name == S3:
        from .s3 import S3RemoteStorage  # obstore loads only on nodes that use S3

        return S3RemoteStorage(config.store)
    raise ValueError(f"unknown remote storage class {config.class_name!r}")
