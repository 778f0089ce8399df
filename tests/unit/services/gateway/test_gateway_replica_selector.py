"""Kafka's replica selectors (KIP-392), pure: which replica a consumer's fetch is read from."""

import pytest

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.services.gateway.config import GatewayConfig
from riverlog.services.gateway.routing.replica_selector import (
    LeaderSelector,
    RackAwareReplicaSelector,
    ReplicaView,
    selector_named,
)

# Leader 1 in rack a; followers 2 (rack b) and 3 (rack c).
REPLICAS = (ReplicaView(1, "a", True), ReplicaView(2, "b", True), ReplicaView(3, "c", True))


def test_leader_selector_always_answers_the_leader() -> None:
    assert LeaderSelector().select("b", 1, REPLICAS) == 1
    assert LeaderSelector().select("", 1, REPLICAS) == 1


@pytest.mark.parametrize(
    ("rack", "expected"),
    [
        ("b", 2),  # the in-sync follower in the client's rack
        ("c", 3),
        ("a", 1),  # the leader is in the client's rack
        ("", 1),  # no client.rack: the leader
        ("z", 1),  # no replica in that rack: the leader
    ],
)
def test_rack_aware_picks_the_clients_rack_else_the_leader(rack: str, expected: int) -> None:
    assert RackAwareReplicaSelector().select(rack, 1, REPLICAS) == expected


def test_rack_aware_skips_replicas_out_of_sync() -> None:
    replicas = (ReplicaView(1, "a", True), ReplicaView(2, "b", False), ReplicaView(3, "c", True))
    assert RackAwareReplicaSelector().select("b", 1, replicas) == 1


def test_rack_aware_prefers_the_leader_then_the_lowest_node_id_within_a_rack() -> None:
    same_rack = (ReplicaView(5, "b", True), ReplicaView(4, "b", True), ReplicaView(1, "a", True))
    assert RackAwareReplicaSelector().select("b", 1, same_rack) == 4
    with_leader = (ReplicaView(5, "b", True), ReplicaView(4, "b", True))
    assert RackAwareReplicaSelector().select("b", 5, with_leader) == 5


def test_selector_by_config_name() -> None:
    assert isinstance(selector_named("leader"), LeaderSelector)
    assert isinstance(selector_named("rack-aware"), RackAwareReplicaSelector)
    assert GatewayConfig().replica_selector_class == "leader"
    config = GatewayConfig.from_overrides({"replica.selector.class": "rack-aware"})
    assert config.replica_selector_class == "rack-aware"


def test_unknown_selector_is_refused_with_invalid_config() -> None:
    with pytest.raises(RiverlogError) as info:
        GatewayConfig.from_overrides({"replica.selector.class": "closest"})
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert "leader, rack-aware" in info.value.message
