"""The coordinator's settings (Kafka names, refused unknown keys) and the record format of
`__consumer_offsets` (round trips, tombstones, unknown versions)."""

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.coordinator.config import CoordinatorConfig
from riverlog.services.coordinator.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    OwnerKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_record,
    offset_record,
    owner_marker,
)


def test_config_by_kafka_names() -> None:
    config = CoordinatorConfig.from_overrides(
        {"group.min.session.timeout.ms": "100", "offsets.retention.minutes": "1"}
    )
    assert config.group_min_session_timeout_ms == 100
    assert config.offsets_retention_ms == 60_000
    assert CoordinatorConfig().group_initial_rebalance_delay_ms == 3_000
    for bad in ({"no.such.key": "1"}, {"group.max.size": "x"}, {"group.max.size": "-1"}):
        with pytest.raises(RiverlogError) as error:
            CoordinatorConfig.from_overrides(bad)
        assert error.value.code == ErrorCode.INVALID_CONFIG


def test_records_round_trip() -> None:
    tp = TopicPartition("orders", 3)
    offset = offset_record("g", tp, OffsetValue(42, 5, "meta", 1_000))
    assert decode_key(offset.key) == OffsetKey("g", tp)
    assert offset.value is not None
    assert decode_offset_value(offset.value) == OffsetValue(42, 5, "meta", 1_000)
    assert offset_record("g", tp, None).value is None
    member = MemberValue("m-1", "i-1", "client", "10.0.0.1", 5_000, 3_000, b"\x00sub", b"\x01asg")
    value = GroupValue("consumer", 7, "range", "m-1", 2_000, [member])
    group = group_record("g", value)
    assert decode_key(group.key) == GroupKey("g")
    assert group.value is not None
    assert decode_group_value(group.value) == value
    assert decode_key(owner_marker(2, 9).key) == OwnerKey(2, 9)
    with pytest.raises(ValueError):
        decode_key(b'{"v":99}')


def test_keys_are_stable_bytes_per_logical_key_so_compaction_keeps_the_latest() -> None:
    """The log cleaner compares key bytes: every record of one group or one committed offset
    must carry the same key whatever its value (or tombstone), and different ones differ."""
    tp = TopicPartition("orders", 3)
    first = offset_record("g", tp, OffsetValue(1, -1, "", 1))
    later = offset_record("g", tp, OffsetValue(2, 4, "m", 2))
    tombstone = offset_record("g", tp, None)
    assert first.key == later.key == tombstone.key
    assert tombstone.value is None
    assert first.key == b'{"g":"g","p":3,"t":"orders","v":1}'  # the bytes of existing logs
    member = MemberValue("m-1", None, "c", "h", 1, 1, b"", b"")
    stable = group_record("g", GroupValue("consumer", 1, "range", "m-1", 0, [member]))
    empty = group_record("g", GroupValue("consumer", 2, None, None, 0, []))
    deleted = group_record("g", None)
    assert stable.key == empty.key == deleted.key == b'{"g":"g","v":2}'
    assert deleted.value is None
    keys = {
        first.key,
        stable.key,
        offset_record("g", TopicPartition("orders", 4), None).key,
        offset_record("h", tp, None).key,
        group_record("g\u00e9", None).key,
        owner_marker(1, 1).key,
        owner_marker(1, 2).key,
    }
    assert len(keys) == 7
