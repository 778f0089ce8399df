"""Metadata settings from flags and --config, and the JSON records stored in etcd."""

from __future__ import annotations

import pytest

from riverlog.common.cluster.image import NodeInfo, PartitionInfo
from riverlog.common.types import TopicPartition
from riverlog.services.metadata.config import MetadataConfig
from riverlog.services.metadata.records import (
    ControllerRecord,
    InstanceRecord,
    TopicRecord,
    node_decode,
    node_encode,
    partition_decode,
    partition_encode,
    topic_info,
)
from riverlog.services.metadata.store import Keys


def make(**overrides: str) -> MetadataConfig:
    return MetadataConfig.from_args(1, "127.0.0.1", 9093, "http://127.0.0.1:2379", overrides)


def test_defaults_are_kafkas():
    config = make()
    assert config.session_timeout_ms == 9000
    assert config.heartbeat_interval_ms == 2000
    assert config.num_partitions == 1
    assert config.default_replication_factor == 1
    assert config.etcd_prefix == "/riverlog/"
    assert config.told_heartbeat_interval_ms == 2000


def test_overrides_and_heartbeat_cap():
    config = make(**{"broker.session.timeout.ms": "3000", "num.partitions": "4"})
    assert config.session_timeout_ms == 3000 and config.num_partitions == 4
    assert config.told_heartbeat_interval_ms == 1000


@pytest.mark.parametrize(
    "overrides",
    [
        {"no.such": "1"},
        {"num.partitions": "many"},
        {"num.partitions": "0"},
        {"broker.session.timeout.ms": "99999999999"},
        {"metadata.etcd.prefix": "no-slashes"},
    ],
)
def test_bad_settings(overrides):
    with pytest.raises(ValueError):
        make(**overrides)


def test_leader_rebalance_settings():
    config = make()
    assert config.auto_leader_rebalance is True
    assert config.leader_imbalance_check_interval_s == 300
    assert config.leader_imbalance_per_broker_percentage == 10
    config = make(
        **{
            "auto.leader.rebalance.enable": "FALSE",
            "leader.imbalance.check.interval.seconds": "5",
            "leader.imbalance.per.broker.percentage": "25",
        }
    )
    assert config.auto_leader_rebalance is False
    assert config.leader_imbalance_check_interval_s == 5
    assert config.leader_imbalance_per_broker_percentage == 25
    with pytest.raises(ValueError):
        make(**{"auto.leader.rebalance.enable": "yes"})


def test_bad_flags():
    with pytest.raises(ValueError):
        MetadataConfig.from_args(-1, "h", 1, "http://e:1", {})
    with pytest.raises(ValueError):
        MetadataConfig.from_args(1, "h", 1, " , ", {})


def test_records_round_trip():
    c = ControllerRecord(2, 7, "127.0.0.1", 9000)
    assert ControllerRecord.decode(c.encode()) == c
    assert c.encode() == ControllerRecord(2, 7, "127.0.0.1", 9000).encode()  # byte-stable
    i = InstanceRecord(3, "h", 1)
    assert InstanceRecord.decode(i.encode()) == i
    t = TopicRecord("id", 3, {"retention.ms": "1"}, False)
    decoded = TopicRecord.decode(t.encode())
    assert (decoded.topic_id, decoded.partitions, dict(decoded.configs)) == ("id", 3, t.configs)
    p = PartitionInfo(4, 1, 2, (1, 2), (1,), 5)
    assert partition_decode(4, partition_encode(p)) == p
    n = NodeInfo("storage", 1, "h", 2, "r", 3, 4)
    assert node_decode(node_encode(n, 99)) == (n, 99)
    offline = frozenset({TopicPartition("t", 0), TopicPartition("u", 3)})
    n = NodeInfo("storage", 1, "h", 2, "r", 3, 4, offline)
    assert node_decode(node_encode(n, 99)) == (n, 99)


def test_topic_info_hides_partitions_beyond_the_record():
    parts = {p: PartitionInfo(p, 0, 0, (0,), (0,)) for p in range(4)}
    info = topic_info("t", TopicRecord("id", 3), parts)
    assert [p.partition for p in info.partitions] == [0, 1, 2]


def test_key_schema():
    keys = Keys("/rl/")
    assert keys.controller == "/rl/controller"
    assert keys.node("storage", 3) == "/rl/nodes/storage/3"
    assert keys.partition("a.b", 2) == "/rl/partitions/a.b/2"
    assert keys.partitions_of("a") == "/rl/partitions/a/"
    assert keys.relative("/rl/topics/x") == "topics/x"
