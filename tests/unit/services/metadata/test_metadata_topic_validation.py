"""Topic request checks: Kafka's name rules and '.'/'_' collisions, partition counts,
replication factors, configs and incremental config operations."""

from __future__ import annotations

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.metadata.controller import topic_validation as v
from riverlog.services.metadata.controller.topic_validation import ConfigOp


def code_of(fn, *args):
    with pytest.raises(RiverlogError) as err:
        fn(*args)
    return err.value.code


@pytest.mark.parametrize(
    "name", ["a", "orders", "A-b_c.d", "x" * 249, "__consumer_offsets", "0", "..."]
)
def test_legal_names(name):
    v.validate_topic_name(name)


@pytest.mark.parametrize(
    "name", ["", ".", "..", "x" * 250, "a/b", "a b", "é", "tab\t", "a\x00", "a*", "a,b"]
)
def test_illegal_names(name):
    assert code_of(v.validate_topic_name, name) == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_collisions():
    v.check_collision("a.b", ["a.b", "c"])  # itself is not a collision
    assert code_of(v.check_collision, "a_b", ["a.b"]) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert code_of(v.check_collision, "x.y_z", ["x_y.z"]) == ErrorCode.INVALID_TOPIC_EXCEPTION
    v.check_collision("a-b", ["a.b", "a_c"])


def test_partitions():
    assert v.resolve_partitions(-1, 3) == 3
    assert v.resolve_partitions(7, 3) == 7
    for bad in (0, -2, -1_000, v.MAX_PARTITIONS + 1, 2**31 - 1):
        assert code_of(v.resolve_partitions, bad, 1) == ErrorCode.INVALID_PARTITIONS


def test_replication_factor():
    assert v.resolve_replication_factor(-1, 1, 1) == 1
    assert v.resolve_replication_factor(3, 1, 3) == 3
    for bad in (0, -2, 4, 2**31 - 1):
        assert code_of(v.resolve_replication_factor, bad, 1, 3) == (
            ErrorCode.INVALID_REPLICATION_FACTOR
        )
    assert code_of(v.resolve_replication_factor, -1, 2, 1) == ErrorCode.INVALID_REPLICATION_FACTOR


def test_partition_increase():
    v.validate_partition_increase("t", 3, 4)
    for bad in (3, 2, 0, -1, v.MAX_PARTITIONS + 1):
        assert code_of(v.validate_partition_increase, "t", 3, bad) == ErrorCode.INVALID_PARTITIONS


def test_configs():
    assert v.validate_configs({"retention.ms": " 100 "}) == {"retention.ms": "100"}
    for bad in ({"nope": "1"}, {"retention.ms": "x"}, {"segment.bytes": "1"}):
        assert code_of(v.validate_configs, bad) == ErrorCode.INVALID_CONFIG


def test_incremental_config_ops():
    current = {"retention.ms": "100"}
    out = v.apply_config_ops(
        current,
        [ConfigOp("retention.ms", "", "DELETE"), ConfigOp("cleanup.policy", "compact", "SET")],
    )
    assert out == {"cleanup.policy": "compact"}
    assert current == {"retention.ms": "100"}  # the input is not modified
    assert v.apply_config_ops({}, [ConfigOp("retention.ms", "", "DELETE")]) == {}
    cases = [
        ([ConfigOp("nope", "1", "SET")], ErrorCode.INVALID_CONFIG),
        ([ConfigOp("nope", "", "DELETE")], ErrorCode.INVALID_CONFIG),
        ([ConfigOp("retention.ms", "-9", "SET")], ErrorCode.INVALID_CONFIG),
        ([ConfigOp("retention.ms", "1", "APPEND")], ErrorCode.INVALID_REQUEST),
        ([ConfigOp("retention.ms", "1", "SET")] * 2, ErrorCode.INVALID_REQUEST),
    ]
    for ops, code in cases:
        assert code_of(v.apply_config_ops, current, ops) == code


def test_a_compacted_topic_cannot_be_tiered_on_create_or_alter():
    """remote.storage.enable=true with cleanup.policy containing compact is INVALID_CONFIG,
    whichever of the two a create or an alter brings; the current configs stay as they were."""
    tiered = {"remote.storage.enable": "true"}
    compacted = {"cleanup.policy": "compact"}
    assert code_of(v.validate_configs, {**tiered, **compacted}) == ErrorCode.INVALID_CONFIG
    assert code_of(v.validate_configs, {**tiered, "cleanup.policy": "delete,compact"}) == (
        ErrorCode.INVALID_CONFIG
    )
    assert v.validate_configs(tiered) == tiered
    for current, op in [
        (tiered, ConfigOp("cleanup.policy", "compact", "SET")),
        (compacted, ConfigOp("remote.storage.enable", "true", "SET")),
    ]:
        before = dict(current)
        assert code_of(v.apply_config_ops, current, [op]) == ErrorCode.INVALID_CONFIG
        assert current == before
    # Both in one alter is refused too; turning one off while turning the other on is fine.
    both = [
        ConfigOp("remote.storage.enable", "true", "SET"),
        ConfigOp("cleanup.policy", "compact", "SET"),
    ]
    assert code_of(v.apply_config_ops, {}, both) == ErrorCode.INVALID_CONFIG
    swap = [
        ConfigOp("remote.storage.enable", "", "DELETE"),
        ConfigOp("cleanup.policy", "compact", "SET"),
    ]
    assert v.apply_config_ops(tiered, swap) == compacted


def test_describe_configs_flags_defaults():
    entries = {name: (value, d) for name, value, d in v.describe_configs({"retention.ms": "5"})}
    assert entries["retention.ms"] == ("5", False)
    assert entries["cleanup.policy"] == ("delete", True)
    assert entries["unclean.leader.election.enable"] == ("false", True)


def test_duplicates():
    assert v.duplicates(["a", "b", "a", "c", "b"]) == {"a", "b"}
    assert v.duplicates([]) == set()
