"""LogConfig: Kafka's defaults, overrides validated through the shared topic-config catalog."""

from __future__ import annotations

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.storage.log import LogConfig


def test_defaults_are_kafkas() -> None:
    c = LogConfig()
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.segment_index_bytes == 10485760
    assert c.index_interval_bytes == 4096
    assert c.retention_ms == 604800000
    assert c.retention_bytes == -1
    assert c.max_message_bytes == 1048588
    assert c.message_timestamp_type == "CreateTime"
    assert c.cleanup_policy == ("delete",)
    assert c.min_insync_replicas == 1
    assert c.unclean_leader_election_enable is False
    assert c.flush_messages == c.flush_ms == 2**63 - 1
    assert c.delete_enabled and not c.compact_enabled and not c.log_append_time


def test_overrides() -> None:
    c = LogConfig.from_overrides(
        {
            "retention.ms": "-1",
            "segment.bytes": " 4096 ",
            "cleanup.policy": "compact,delete",
            "message.timestamp.type": "LogAppendTime",
            "unclean.leader.election.enable": "TRUE",
            "compression.type": "zstd",  # a valid topic key the log does not use
        }
    )
    assert (c.retention_ms, c.segment_bytes) == (-1, 4096)
    assert c.compact_enabled and c.delete_enabled and c.log_append_time
    assert c.unclean_leader_election_enable is True
    assert c.to_dict()["cleanup.policy"] == "compact,delete"
    assert c.to_dict()["unclean.leader.election.enable"] == "true"
    assert LogConfig.from_overrides(c.to_dict()) == c


def test_overrides_apply_over_a_base() -> None:
    base = LogConfig.from_overrides({"retention.ms": "1000"})
    c = LogConfig.from_overrides({"segment.ms": "50"}, base)
    assert (c.retention_ms, c.segment_ms) == (1000, 50)


@pytest.mark.parametrize(
    ("overrides", "why"),
    [
        ({"no.such.key": "1"}, "unknown topic config 'no.such.key'"),
        ({"segment.bytes": "13"}, "segment.bytes: must be at least 14"),
        ({"segment.bytes": "2147483648"}, "segment.bytes: must be at most"),
        ({"retention.ms": "-2"}, "retention.ms: must be at least -1"),
        ({"retention.ms": "soon"}, "retention.ms"),
        ({"message.timestamp.type": "Now"}, "must be one of CreateTime, LogAppendTime"),
        ({"cleanup.policy": "delete,shred"}, "cleanup.policy"),
        ({"unclean.leader.election.enable": "yes"}, "unclean.leader.election.enable"),
        ({"min.insync.replicas": "0"}, "min.insync.replicas"),
        ({"flush.messages": "0"}, "flush.messages"),
        ({"segment.ms": 5}, "values are strings"),
    ],
)
def test_bad_overrides_are_rejected(overrides: dict[str, str], why: str) -> None:
    with pytest.raises(RiverlogError) as caught:
        LogConfig.from_overrides(overrides)
    assert caught.value.code == ErrorCode.INVALID_CONFIG
    assert why in caught.value.message
