"""Which nodes the replica balancer rates with balancer.replication.throttled.rate while its
moves run, which it clears after, and that a rate an operator set is never touched."""

from __future__ import annotations

import pytest

from riverlog.common.node_config import FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE
from riverlog.services.metadata.config import MetadataConfig
from riverlog.services.metadata.controller import balance_throttle as b

RATE = 1000


def rated(value: int | str) -> dict[str, str]:
    return {LEADER_THROTTLED_RATE: str(value), FOLLOWER_THROTTLED_RATE: str(value)}


def test_the_involved_nodes_without_a_rate_are_rated_once() -> None:
    assert b.nodes_to_rate({1, 2, 4}, {}, owned=(), rate=RATE) == [1, 2, 4]
    assert b.nodes_to_rate({1, 2, 4}, {"2": rated(RATE)}, owned={2}, rate=RATE) == [1, 4]


def test_an_operators_rate_on_a_node_or_the_default_is_left_alone() -> None:
    configs = {"2": {LEADER_THROTTLED_RATE: "5"}}
    assert b.nodes_to_rate({1, 2}, configs, owned=(), rate=RATE) == [1]
    assert b.nodes_to_rate({1, 2}, {"": rated(7)}, owned=(), rate=RATE) == []


def test_off_rates_nothing_and_adopts_nothing() -> None:
    assert b.nodes_to_rate({1, 2}, {}, owned=(), rate=0) == []
    assert b.adopted_nodes({"1": rated(0)}, 0) == set()


def test_nodes_are_cleared_once_no_move_involves_them() -> None:
    configs = {"1": rated(RATE), "2": rated(RATE), "3": rated(RATE)}
    assert b.nodes_to_clear({1, 2, 3}, {2}, configs, RATE) == ([1, 3], [])
    assert b.nodes_to_clear({1, 2}, {1, 2}, configs, RATE) == ([], [])


def test_a_rate_an_operator_changed_meanwhile_is_forgotten_not_cleared() -> None:
    configs = {"1": rated(99), "3": rated(RATE)}  # 2: the operator removed it
    assert b.nodes_to_clear({1, 2, 3}, set(), configs, RATE) == ([3], [1, 2])


def test_a_new_controller_adopts_only_rates_that_are_exactly_the_balancers() -> None:
    configs = {
        "": rated(RATE),  # the default entity is the operator's
        "1": rated(RATE),
        "2": rated(99),
        "3": {LEADER_THROTTLED_RATE: str(RATE)},
    }
    assert b.adopted_nodes(configs, RATE) == {1}


def test_the_balancer_rate_setting_defaults_to_10_mib_and_0_turns_it_off() -> None:
    config = MetadataConfig.from_args(1, "127.0.0.1", 0, "http://127.0.0.1:2379", {})
    assert config.balancer_replication_throttled_rate == 10 * 1024 * 1024
    off = MetadataConfig.from_args(
        1, "h", 0, "http://e:1", {"balancer.replication.throttled.rate": "0"}
    )
    assert off.balancer_replication_throttled_rate == 0
    with pytest.raises(ValueError, match=r"balancer\.replication\.throttled\.rate"):
        MetadataConfig.from_args(
            1, "h", 0, "http://e:1", {"balancer.replication.throttled.rate": "-1"}
        )
