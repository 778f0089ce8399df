"""Dynamic storage-node configs: names, values, entities and how a node's rate resolves."""

import pytest

from riverlog.common import node_config
from riverlog.common.errors import ErrorCode, RiverlogError

LEADER = node_config.LEADER_THROTTLED_RATE
FOLLOWER = node_config.FOLLOWER_THROTTLED_RATE


def test_valid_rates_are_stripped() -> None:
    assert node_config.validate({LEADER: " 1048576 ", FOLLOWER: "0"}) == {
        LEADER: "1048576",
        FOLLOWER: "0",
    }


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("leader.replication.throttled.rat", "1", "unknown node config"),
        ("log.retention.ms", "1", "unknown node config"),
        (LEADER, "-1", "must be at least 0"),
        (FOLLOWER, "fast", "expected a long"),
        (FOLLOWER, "1.5", "expected a long"),
    ],
)
def test_bad_names_and_values_are_invalid_config(name: str, value: str, fragment: str) -> None:
    with pytest.raises(RiverlogError) as info:
        node_config.validate({name: value})
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert fragment in info.value.message


def test_entities_are_node_ids_or_the_default() -> None:
    assert node_config.validate_entity("") == ""
    assert node_config.validate_entity(" 02 ") == "2"
    for bad in ("-1", "node2", "1.0"):
        with pytest.raises(RiverlogError) as info:
            node_config.validate_entity(bad)
        assert info.value.code == ErrorCode.INVALID_REQUEST
    assert node_config.entity_label("") == "<default>"


def test_a_nodes_own_value_wins_over_the_default() -> None:
    configs = {"": {LEADER: "100", FOLLOWER: "200"}, "2": {LEADER: "50"}}
    assert node_config.rate(configs, 2, LEADER) == 50
    assert node_config.rate(configs, 2, FOLLOWER) == 200
    assert node_config.rate(configs, 3, LEADER) == 100
    assert node_config.rate({}, 3, LEADER) is None


def test_describe_lists_every_dynamic_config_with_defaults() -> None:
    rows = node_config.describe({FOLLOWER: "10"})
    assert rows == [
        (FOLLOWER, "10", False),
        (LEADER, str(node_config.NODE_CONFIGS[LEADER].default), True),
    ]
