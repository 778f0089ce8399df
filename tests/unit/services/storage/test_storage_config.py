"""The storage node's command line: Kafka's key names, broker log defaults turned into topic
defaults, and a clear refusal (exit status 2, the key named) for anything unknown or bad."""

from pathlib import Path

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.storage.app import config_from_args
from riverlog.services.storage.config import LONG_MAX, ConnectionLimits, StorageConfig

BASE = ["--node-id", "3", "--log-dirs", "/tmp/a,/tmp/b", "--metadata", "h:1,h:2"]


def test_defaults_and_cli() -> None:
    config, level = config_from_args(
        [*BASE, "--port", "0", "--zero-copy-port", "0", "--rack", "r1"]
    )
    assert (config.node_id, config.rack, level) == (3, "r1", "INFO")
    assert config.log_dirs == (Path("/tmp/a"), Path("/tmp/b"))
    assert config.metadata_addresses == ("h:1", "h:2")
    assert config.log_retention_check_interval_ms == 300_000
    assert config.log_flush_offset_checkpoint_interval_ms == 60_000
    assert config.log_flush_interval_ms == LONG_MAX
    assert dict(config.log_defaults) == {}


def test_kafka_keys() -> None:
    config, _ = config_from_args(
        [
            *BASE,
            "--config", "log.retention.check.interval.ms=1000",
            "--config", "log.flush.offset.checkpoint.interval.ms=500",
            "--config", "log.segment.bytes=1048576",
            "--config", "log.retention.hours=2",
            "--config", "log.flush.interval.ms=100",
            "--config", "message.max.bytes=2000000",
        ]
    )  # fmt: skip
    assert config.log_retention_check_interval_ms == 1000
    assert config.log_flush_offset_checkpoint_interval_ms == 500
    assert dict(config.log_defaults) == {
        "segment.bytes": "1048576",
        "retention.ms": str(2 * 3600_000),
        "flush.ms": "100",
        "max.message.bytes": "2000000",
    }


def test_replication_keys() -> None:
    default, _ = config_from_args(BASE)
    assert (default.replica_lag_time_max_ms, default.replica_fetch_wait_max_ms) == (30_000, 500)
    assert default.replica_fetch_zero_copy_enable is True
    config, _ = config_from_args(
        [
            *BASE,
            "--config", "replica.lag.time.max.ms=2000",
            "--config", "replica.fetch.wait.max.ms=100",
            "--config", "replica.fetch.max.bytes=65536",
            "--config", "replica.fetch.backoff.ms=50",
            "--config", "replica.fetch.zero.copy.enable=FALSE",
            "--config", "min.insync.replicas=2",
        ]
    )  # fmt: skip
    assert (config.replica_lag_time_max_ms, config.replica_fetch_wait_max_ms) == (2000, 100)
    assert (config.replica_fetch_max_bytes, config.replica_fetch_backoff_ms) == (65536, 50)
    assert config.replica_fetch_zero_copy_enable is False
    assert dict(config.log_defaults) == {"min.insync.replicas": "2"}


@pytest.mark.parametrize(
    "extra",
    [
        ["--config", "replica.fetch.zero.copy.enable=maybe"],
        ["--config", "replica.lag.time.max.ms=0"],
        ["--config", "no.such.key=1"],
        ["--config", "log.retention.check.interval.ms=often"],
        ["--config", "log.retention.check.interval.ms=0"],
        ["--config", "log.segment.bytes=-5"],
        ["--config", "missing-equals"],
        ["--zero-copy-port", "70000"],
    ],
)
def test_bad_settings_exit_with_a_message(extra: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        config_from_args([*BASE, *extra])
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_from_settings_checks_dirs_and_addresses() -> None:
    common = {"node_id": 1, "host": "h", "port": 0, "zero_copy_port": 0}
    for bad in (
        {"log_dirs": "", "metadata": "h:1"},
        {"log_dirs": "/a,/a", "metadata": "h:1"},
        {"log_dirs": "/a", "metadata": " "},
    ):
        with pytest.raises(RiverlogError) as exc:
            StorageConfig.from_settings(**common, **bad)
        assert exc.value.code == ErrorCode.INVALID_CONFIG


def test_log_cleaner_keys() -> None:
    default, _ = config_from_args(list(BASE))
    assert default.log_cleaner_enable is True
    assert default.log_cleaner_backoff_ms == 15_000
    assert default.log_cleaner_dedupe_buffer_size == 134_217_728
    config, _ = config_from_args(
        [
            *BASE,
            "--config", "log.cleaner.enable=false",
            "--config", "log.cleaner.backoff.ms=200",
            "--config", "log.cleaner.dedupe.buffer.size=1048576",
            "--config", "log.cleaner.min.cleanable.ratio=0.1",
            "--config", "log.cleaner.delete.retention.ms=1000",
            "--config", "log.cleaner.min.compaction.lag.ms=5",
            "--config", "log.cleaner.max.compaction.lag.ms=60000",
        ]
    )  # fmt: skip
    assert config.log_cleaner_enable is False
    assert config.log_cleaner_backoff_ms == 200
    assert config.log_cleaner_dedupe_buffer_size == 1_048_576
    assert dict(config.log_defaults) == {
        "min.cleanable.dirty.ratio": "0.1",
        "delete.retention.ms": "1000",
        "min.compaction.lag.ms": "5",
        "max.compaction.lag.ms": "60000",
    }


def test_transaction_partition_verification_key() -> None:
    default, _ = config_from_args(list(BASE))
    assert default.transaction_partition_verification_enable is True  # Kafka's default
    config, _ = config_from_args(
        [*BASE, "--config", "transaction.partition.verification.enable=false"]
    )
    assert config.transaction_partition_verification_enable is False


def test_direct_port_limits_and_host() -> None:
    config, _ = config_from_args(BASE)
    assert config.direct_limits == ConnectionLimits(1000, 100, 10_000, 600_000, 8_388_608)
    assert config.direct_host == "127.0.0.1"  # --host's
    config, _ = config_from_args(
        [
            *BASE,
            "--direct-host", "0.0.0.0",
            "--config", "max.connections=50",
            "--config", "max.connections.per.ip=5",
            "--config", "direct.grant.timeout.ms=2000",
            "--config", "connections.max.idle.ms=60000",
            "--config", "direct.max.request.bytes=1048576",
        ]
    )  # fmt: skip
    assert config.direct_host == "0.0.0.0"
    assert config.direct_limits == ConnectionLimits(50, 5, 2000, 60_000, 1_048_576)
    for bad in ("direct.max.request.bytes=16777216", "max.connections=0"):
        with pytest.raises(SystemExit):
            config_from_args([*BASE, "--config", bad])
