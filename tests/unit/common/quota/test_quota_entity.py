"""Config entities (the eight path shapes, names that need escaping), metric entities, and the
validation every stored quota goes through."""

from __future__ import annotations

import math

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.quota import (
    DEFAULT,
    ConfigLevel,
    MetricEntity,
    QuotaEntity,
    QuotaType,
    parse_quota_configs,
    validate_quota_value,
    validate_quota_values,
)

LEVELS = [
    ("/config/users/alice/clients/c1", "alice", "c1", ConfigLevel.USER_CLIENT),
    ("/config/users/alice/clients/<default>", "alice", DEFAULT, ConfigLevel.USER_DEFAULT_CLIENT),
    ("/config/users/alice", "alice", None, ConfigLevel.USER),
    ("/config/users/<default>/clients/c1", DEFAULT, "c1", ConfigLevel.DEFAULT_USER_CLIENT),
    (
        "/config/users/<default>/clients/<default>",
        DEFAULT,
        DEFAULT,
        ConfigLevel.DEFAULT_USER_DEFAULT_CLIENT,
    ),
    ("/config/users/<default>", DEFAULT, None, ConfigLevel.DEFAULT_USER),
    ("/config/clients/c1", None, "c1", ConfigLevel.CLIENT),
    ("/config/clients/<default>", None, DEFAULT, ConfigLevel.DEFAULT_CLIENT),
]


@pytest.mark.parametrize(("path", "user", "client_id", "level"), LEVELS)
def test_each_of_the_eight_paths_parses_to_its_level_and_back(path, user, client_id, level):
    entity = QuotaEntity.parse(path)
    assert entity == QuotaEntity(user, client_id)
    assert entity.level is level
    assert entity.path == path
    assert str(entity) == path


def test_levels_are_numbered_in_kafkas_order_of_precedence():
    assert [level for *_, level in LEVELS] == sorted(ConfigLevel)
    assert [int(level) for level in ConfigLevel] == list(range(1, 9))


@pytest.mark.parametrize("name", ["CN=alice,O=acme", "a/b", "100%", "with space", "ünï"])
def test_names_with_path_characters_round_trip_escaped(name):
    entity = QuotaEntity(name, name)
    assert entity.path.count("/") == 5  # /config/users/<x>/clients/<y>: no extra separators
    assert QuotaEntity.parse(entity.path) == entity


def test_a_literal_default_name_cannot_pass_as_the_marker():
    with pytest.raises(RiverlogError) as info:
        QuotaEntity.parse("/config/users/%3Cdefault%3E")
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert "reserved" in info.value.message


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/config",
        "/config/users",
        "/config/users/",
        "config/users/alice",
        "/config/topics/t",
        "/config/clients/c1/users/alice",
        "/config/users/alice/clients",
        "/config/users/alice/clients/c1/extra",
        "/other/users/alice",
    ],
)
def test_malformed_paths_are_refused_with_the_expected_shapes(path):
    with pytest.raises(RiverlogError) as info:
        QuotaEntity.parse(path)
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert repr(path) in info.value.message or "empty name" in info.value.message


@pytest.mark.parametrize(("user", "client_id"), [(None, None), ("", None), (None, ""), ("", "c")])
def test_entities_without_a_name_are_refused(user, client_id):
    with pytest.raises(RiverlogError) as info:
        QuotaEntity(user, client_id)
    assert info.value.code is ErrorCode.INVALID_REQUEST


def test_metric_entity_keys_tell_absent_parts_from_empty_ones():
    keys = {
        MetricEntity("alice", None).key,
        MetricEntity("alice", "").key,
        MetricEntity(None, "").key,
        MetricEntity(None, "alice").key,
        MetricEntity("a,client-id=b", None).key,
        MetricEntity("a", "b").key,
    }
    assert len(keys) == 6
    assert MetricEntity("alice", "c1").key == "user=alice,client-id=c1"
    with pytest.raises(RiverlogError):
        MetricEntity(None, None)


def test_shards_are_stable_across_processes_and_in_range():
    entity = MetricEntity("alice", "c1")
    # crc32 of the key, not hash(): the same on every gateway and quota instance
    assert entity.shard(1) == 0
    assert entity.shard(7) == entity.shard(7) == 3882578406 % 7
    shards = {MetricEntity(f"user{i}", None).shard(4) for i in range(200)}
    assert shards == {0, 1, 2, 3}
    with pytest.raises(ValueError):
        entity.shard(0)


@pytest.mark.parametrize(
    ("quota_type", "raw", "expected"),
    [
        (QuotaType.PRODUCE, 1048576, 1048576.0),
        (QuotaType.FETCH, 2048.0, 2048.0),
        (QuotaType.PRODUCE, "1000", 1000.0),
        (QuotaType.FETCH, "1e6", 1_000_000.0),
        (QuotaType.REQUEST, 0.5, 0.5),
        (QuotaType.REQUEST, "250", 250.0),  # more than one thread is allowed, as in Kafka
    ],
)
def test_good_values_are_accepted_as_floats(quota_type, raw, expected):
    assert validate_quota_value(quota_type, raw) == expected


@pytest.mark.parametrize(
    ("quota_type", "raw"),
    [
        (QuotaType.PRODUCE, -1),
        (QuotaType.PRODUCE, 0),
        (QuotaType.FETCH, -1048576.0),
        (QuotaType.PRODUCE, 10.5),  # byte rates are Kafka LONG keys
        (QuotaType.FETCH, "12.25"),
        (QuotaType.REQUEST, 0),
        (QuotaType.REQUEST, -0.01),
        (QuotaType.REQUEST, math.nan),
        (QuotaType.PRODUCE, math.inf),
        (QuotaType.PRODUCE, "fast"),
        (QuotaType.PRODUCE, ""),
        (QuotaType.PRODUCE, True),
        (QuotaType.PRODUCE, None),
        (QuotaType.REQUEST, [50]),
    ],
)
def test_bad_values_are_refused_with_key_value_and_rule(quota_type, raw):
    with pytest.raises(RiverlogError) as info:
        validate_quota_value(quota_type, raw, "/config/users/alice")
    error = info.value
    assert error.code is ErrorCode.INVALID_CONFIG
    assert quota_type.key in error.message
    assert repr(raw) in error.message
    assert "/config/users/alice" in error.message
    assert "above 0" in error.message


def test_unknown_keys_are_refused_listing_the_known_ones():
    with pytest.raises(RiverlogError) as info:
        validate_quota_values({"producer_byte_rate": 10, "producer_rate": 10}, "/config/users/a")
    error = info.value
    assert error.code is ErrorCode.INVALID_REQUEST
    assert "'producer_rate'" in error.message
    assert "consumer_byte_rate, producer_byte_rate, request_percentage" in error.message


def test_a_whole_config_is_validated_before_anything_is_returned():
    good = {
        "/config/users/alice": {"producer_byte_rate": 1000, "request_percentage": 25},
        "/config/clients/<default>": {"consumer_byte_rate": "2000"},
        "/config/users/bob": {},  # an entity with nothing set is no entry at all
    }
    parsed = parse_quota_configs(good)
    assert parsed == {
        QuotaEntity("alice", None): {QuotaType.PRODUCE: 1000.0, QuotaType.REQUEST: 25.0},
        QuotaEntity(None, DEFAULT): {QuotaType.FETCH: 2000.0},
    }
    with pytest.raises(RiverlogError) as info:
        parse_quota_configs({**good, "/config/clients/c9": {"consumer_byte_rate": -5}})
    assert info.value.code is ErrorCode.INVALID_CONFIG
    assert "/config/clients/c9" in info.value.message


def test_two_spellings_of_one_entity_are_refused():
    with pytest.raises(RiverlogError) as info:
        parse_quota_configs(
            {
                "/config/users/a b": {"producer_byte_rate": 1},
                "/config/users/a%20b": {"producer_byte_rate": 2},
            }
        )
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert "repeats" in info.value.message
