"""Tiering's node configs (remote_log_config.py and StorageConfig): Kafka's names, the store's
keys under the impl prefix, and a clear INVALID_CONFIG naming the key for bad input."""

from __future__ import annotations

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.storage.config import StorageConfig
from riverlog.services.storage.remote_log_config import RemoteLogConfig


def storage_config(overrides: dict[str, str]) -> StorageConfig:
    return StorageConfig.from_settings(
        node_id=1, host="127.0.0.1", port=0, zero_copy_port=0, log_dirs="/tmp/l",
        metadata="127.0.0.1:1", overrides=overrides,
    )  # fmt: skip


def test_off_by_default() -> None:
    config = storage_config({}).remote_log
    assert not config.enabled
    assert config.class_name == "directory"
    assert config.impl_prefix == "rsm.config."
    assert config.task_interval_ms == 30_000


def test_s3_keys_reach_the_store_without_the_prefix() -> None:
    config = storage_config(
        {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.class.name": "s3",
            "rsm.config.s3.bucket": "tier",
            "rsm.config.s3.endpoint": "http://127.0.0.1:9000",
            "rsm.config.s3.region": "eu-west-1",
            "remote.log.manager.task.interval.ms": "500",
            "log.segment.bytes": "4096",
        }
    )
    assert config.remote_log.enabled
    assert dict(config.remote_log.store) == {
        "s3.bucket": "tier",
        "s3.endpoint": "http://127.0.0.1:9000",
        "s3.region": "eu-west-1",
    }
    assert config.remote_log.task_interval_ms == 500
    assert config.log_defaults["segment.bytes"] == "4096"


def test_a_custom_impl_prefix() -> None:
    config = RemoteLogConfig.from_overrides(
        {
            "remote.log.storage.system.enable": "true",
            "remote.log.storage.manager.impl.prefix": "tier.",
            "tier.dir": "/data/tier",
        }
    )
    assert dict(config.store) == {"dir": "/data/tier"}


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"remote.log.storage.system.enable": "yes"}, "remote.log.storage.system.enable"),
        ({"remote.log.storage.manager.class.name": "hdfs"}, "remote.log.storage.manager.class"),
        ({"remote.log.storage.system.enable": "true"}, "rsm.config.dir is required"),
        (
            {
                "remote.log.storage.system.enable": "true",
                "remote.log.storage.manager.class.name": "s3",
            },
            "rsm.config.s3.bucket is required",
        ),
        ({"rsm.config.s3.bucket": "b"}, "unknown directory store config 'rsm.config.s3.bucket'"),
        ({"remote.log.manager.task.interval.ms": "0"}, "remote.log.manager.task.interval.ms"),
        ({"remote.log.storage.manager.impl.prefix": " "}, "must not be empty"),
    ],
)
def test_bad_input_is_invalid_config_naming_the_key(overrides: dict[str, str], named: str) -> None:
    with pytest.raises(RiverlogError, match=named) as err:
        storage_config(overrides)
    assert err.value.code == ErrorCode.INVALID_CONFIG
