"""The throttled-replicas topic configs the balancer sets on moving partitions, in Kafka's
`partition:node,...` format, the replica sizes it reads, and the balancer's metadata settings."""

from __future__ import annotations

import pytest

from riverlog.common.types import TopicPartition
from riverlog.services.metadata.config import MetadataConfig
from riverlog.services.metadata.controller import replica_sizes
from riverlog.services.metadata.controller import throttled_replicas as t


def test_a_move_throttles_current_replicas_as_leaders_and_adding_ones_as_followers() -> None:
    entries = t.for_move(3, current=(1, 2), target=(2, 4))
    assert t.render(entries[t.LEADER_KEY]) == "3:1,3:2"
    assert t.render(entries[t.FOLLOWER_KEY]) == "3:4"


def test_entries_merge_and_are_removed_per_partition() -> None:
    value = t.with_entries("0:1,0:2", [(3, 4), (0, 1)])
    assert value == "0:1,0:2,3:4"
    assert t.without_partitions(value, {0}) == "3:4"
    assert t.without_partitions(value, {0, 3}) is None  # nothing left: delete the config
    assert t.throttled_partitions("*") == set()  # Kafka's wildcard is not a move's entry


def test_balancer_settings_have_defaults_and_are_checked() -> None:
    config = MetadataConfig.from_args(1, "127.0.0.1", 0, "http://127.0.0.1:2379", {})
    assert not config.balancer_enable
    assert config.balancer_max_concurrent_moves == 3
    assert config.balancer_imbalance_threshold == 2
    on = MetadataConfig.from_args(
        1,
        "127.0.0.1",
        0,
        "http://127.0.0.1:2379",
        {"balancer.enable": "true", "balancer.max.concurrent.moves": "5"},
    )
    assert on.balancer_enable and on.balancer_max_concurrent_moves == 5
    with pytest.raises(ValueError, match=r"balancer\.max\.concurrent\.moves"):
        MetadataConfig.from_args(1, "h", 0, "http://e:1", {"balancer.max.concurrent.moves": "0"})


def test_replica_sizes_round_trip_beside_the_cluster_prefix() -> None:
    sizes = {TopicPartition("t", 1): 2048, TopicPartition("a", 0): 0}
    assert replica_sizes.decode(replica_sizes.encode(sizes)) == sizes
    assert replica_sizes.sizes_prefix("/riverlog/") == "/riverlog-replica-sizes/"
    assert not replica_sizes.sizes_prefix("/riverlog/").startswith("/riverlog/")
