"""Per-partition log configuration: the topic-level keys the log layer reads, typed.

The definitions (names, types, defaults, ranges) live in one table shared by every service,
`riverlog.common.topic_config.TOPIC_CONFIGS`; this module only picks the keys the log uses and
gives them attribute names (dots become underscores: `segment.bytes` → `segment_bytes`).
`LogConfig.from_overrides` validates through that table, so an unknown key or a bad value
raises `RiverlogError(INVALID_CONFIG)` naming the key, exactly as the metadata service would.
Valid topic keys that the log does not use (`compression.type`, ...) are accepted and ignored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.topic_config import TOPIC_CONFIGS, render

LONG_MAX: Final = 2**63 - 1

CREATE_TIME: Final = "CreateTime"
LOG_APPEND_TIME: Final = "LogAppendTime"
CLEANUP_DELETE: Final = "delete"
CLEANUP_COMPACT: Final = "compact"


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The settings of one partition's log; defaults are Kafka's. Frozen: a change of topic
    config makes a new one, handed over with `PartitionLog.update_config`."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    cleanup_policy: tuple[str, ...] = (CLEANUP_DELETE,)
    file_delete_delay_ms: int = 60000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2

    @classmethod
    def from_overrides(
        cls, overrides: Mapping[str, str], base: LogConfig | None = None
    ) -> LogConfig:
        """`base` (Kafka's defaults when None) with the topic's `overrides` applied. Raises
        RiverlogError(INVALID_CONFIG) for an unknown key or a bad value, naming the key."""
        changes: dict[str, Any] = {}
        for key, raw in overrides.items():
            definition = TOPIC_CONFIGS.get(key)
            if definition is None:
                raise RiverlogError(f"unknown topic config {key!r}", ErrorCode.INVALID_CONFIG)
            if not isinstance(raw, str):
                raise RiverlogError(
                    f"invalid value {raw!r} for {key}: values are strings",
                    ErrorCode.INVALID_CONFIG,
                )
            value = definition.parse(raw)
            attr = _ATTRS.get(key)
            if attr is not None:
                changes[attr] = value
        return dataclasses.replace(base if base is not None else cls(), **changes)

    def to_dict(self) -> dict[str, str]:
        """The log's keys with their values as strings, in Kafka's spelling."""
        return {key: render(getattr(self, attr)) for key, attr in _ATTRS.items()}

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def delete_enabled(self) -> bool:
        """Whether time and size retention apply (`cleanup.policy` contains `delete`)."""
        return CLEANUP_DELETE in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return CLEANUP_COMPACT in self.cleanup_policy

    @property
    def effective_local_retention_ms(self) -> int:
        """local.retention.ms, or retention.ms where it is -2 (Kafka's rule)."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def effective_local_retention_bytes(self) -> int:
        """local.retention.bytes, or retention.bytes where it is -2 (Kafka's rule)."""
        if self.local_retention_bytes == -2:
            return self.retention_bytes
        return self.local_retention_bytes

    @property
    def max_segment_ms(self) -> int:
        """How long the active segment may stay open: segment.ms, bounded by
        max.compaction.lag.ms on compacted logs (Kafka's rule: the cleaner never cleans the
        active segment, so it must roll for the lag bound to hold)."""
        if self.compact_enabled:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms


# Topic key → LogConfig attribute, for the keys the log layer reads.
_ATTRS: Final[dict[str, str]] = {
    f.name.replace("_", "."): f.name for f in dataclasses.fields(LogConfig)
}


def _check_against_catalog() -> None:
    """Every LogConfig field is a catalog key with the same default; checked at import so the
    two can never drift apart."""
    defaults = LogConfig()
    for key, attr in _ATTRS.items():
        definition = TOPIC_CONFIGS.get(key)
        if definition is None:
            raise AssertionError(f"LogConfig.{attr}: {key} is not in TOPIC_CONFIGS")
        if definition.default != getattr(defaults, attr):
            raise AssertionError(f"LogConfig.{attr}: default differs from TOPIC_CONFIGS[{key}]")


_check_against_catalog()
