"""The throttled-replica lists: Kafka's format, which partitions a node throttles, and the
lists kafka-reassign-partitions would set for a set of moves."""

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.replication_throttle import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    TopicThrottles,
    nodes_of_moves,
    parse_throttled_replicas,
    partitions_throttled_on,
    throttled_replicas_for_moves,
)
from riverlog.common.topic_config import validate
from riverlog.common.types import TopicPartition


def test_parse_accepts_kafkas_forms() -> None:
    assert parse_throttled_replicas(LEADER_THROTTLED_REPLICAS, "*") is None
    assert parse_throttled_replicas(LEADER_THROTTLED_REPLICAS, " ") == frozenset()
    assert parse_throttled_replicas(LEADER_THROTTLED_REPLICAS, "0:1, 0:2,1:1") == {
        (0, 1),
        (0, 2),
        (1, 1),
    }


@pytest.mark.parametrize("raw", ["0", "0:", ":1", "a:1", "0:1,", "-1:2", "0:1;1:2", "*,0:1"])
def test_parse_refuses_anything_else_with_invalid_config(raw: str) -> None:
    with pytest.raises(RiverlogError) as info:
        parse_throttled_replicas(FOLLOWER_THROTTLED_REPLICAS, raw)
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert FOLLOWER_THROTTLED_REPLICAS in info.value.message
    assert "partition:node" in info.value.message


def test_topic_config_validates_the_lists() -> None:
    assert validate({LEADER_THROTTLED_REPLICAS: " 0:1,1:2 "}) == {
        LEADER_THROTTLED_REPLICAS: "0:1,1:2"
    }
    assert validate({FOLLOWER_THROTTLED_REPLICAS: "*"}) == {FOLLOWER_THROTTLED_REPLICAS: "*"}
    with pytest.raises(RiverlogError) as info:
        validate({LEADER_THROTTLED_REPLICAS: "0-1"})
    assert info.value.code == ErrorCode.INVALID_CONFIG


def test_a_node_throttles_the_pairs_naming_it() -> None:
    raw = "0:1,0:2,1:2,3:3"
    assert partitions_throttled_on(LEADER_THROTTLED_REPLICAS, raw, 2) == {0, 1}
    assert partitions_throttled_on(LEADER_THROTTLED_REPLICAS, raw, 4) == frozenset()
    assert partitions_throttled_on(LEADER_THROTTLED_REPLICAS, "*", 4) is None
    assert partitions_throttled_on(LEADER_THROTTLED_REPLICAS, "bad", 1) == frozenset()


def test_lists_for_moves_are_kafka_reassign_partitions() -> None:
    moves = {
        TopicPartition("a", 0): ((1, 2, 3), (2, 3, 4)),
        TopicPartition("a", 1): ((2, 3, 1), (4, 5, 1)),
        TopicPartition("b", 0): ((1, 2), (2, 1)),  # a reorder copies nothing
        TopicPartition("c", 2): ((3,), (3, 1)),
    }
    lists = throttled_replicas_for_moves(moves)
    assert lists == {
        "a": TopicThrottles(leader="0:1,0:2,0:3,1:1,1:2,1:3", follower="0:4,1:4,1:5"),
        "c": TopicThrottles(leader="2:3", follower="2:1"),
    }
    assert lists["c"].configs() == {
        LEADER_THROTTLED_REPLICAS: "2:3",
        FOLLOWER_THROTTLED_REPLICAS: "2:1",
    }
    for throttles in lists.values():  # what the builder makes, the topic config accepts
        validate(throttles.configs())
    assert nodes_of_moves(moves) == {1, 2, 3, 4, 5}


def test_no_moves_no_lists() -> None:
    assert throttled_replicas_for_moves({}) == {}


def test_rate_configs_set_or_remove_both_rates_per_node() -> None:
    from riverlog.common.node_config import THROTTLED_RATES, rate_configs

    assert rate_configs([3, 1, 3], 500) == {
        1: dict.fromkeys(THROTTLED_RATES, 500),
        3: dict.fromkeys(THROTTLED_RATES, 500),
    }
    assert rate_configs([2], None) == {2: dict.fromkeys(THROTTLED_RATES)}


def test_nodes_with_rates_are_those_with_either_rate_set() -> None:
    from riverlog.common.node_config import (
        FOLLOWER_THROTTLED_RATE,
        LEADER_THROTTLED_RATE,
        nodes_with_rates,
    )

    explicit = {1: {LEADER_THROTTLED_RATE}, 2: set(), 3: {FOLLOWER_THROTTLED_RATE}, 4: {"x"}}
    assert nodes_with_rates(explicit) == [1, 3]
