"""Fixtures of the fuzz tests: their own cluster (etcd, one metadata instance, two storage
nodes, a group coordinator, a quota instance and a gateway: every service a gateway call can
reach), since fuzzed requests create, delete and reconfigure topics, set quotas and users; the
topics and group the pool starts with; a control topic for the health probe that no fuzzed
request names; and the seed (RIVERLOG_FUZZ_SEED, default random, always printed)."""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_cluster import POOL_GROUP, POOL_TOPICS, POOL_USER, PROBE_CLIENT, Probe
from fuzz_values import Pool

from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import admin_pb2, coordinator_pb2, gateway_pb2_grpc


@pytest.fixture(scope="module")
def fuzz_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("fuzz"),
        storage_nodes=2,
        metadata_nodes=1,
        gateways=1,
        coordinators=1,
        quota_nodes=1,
        extra_config={
            "metadata": {"offsets.topic.num.partitions": "4"},
            "coordinator": {
                "group.min.session.timeout.ms": "500",
                "group.initial.rebalance.delay.ms": "0",
            },
        },
    ) as local:
        yield local


@pytest.fixture(scope="module")
def seed() -> int:
    value = int(os.environ.get("RIVERLOG_FUZZ_SEED") or random.SystemRandom().randrange(2**32))
    print(f"fuzz seed {value} (RIVERLOG_FUZZ_SEED={value} reruns it)")
    return value


@pytest.fixture(scope="module")
def pool(fuzz_cluster: LocalCluster) -> Pool:
    """The pool's topics, a group with a committed offset and a user, created for real."""
    for name, partitions, rf in POOL_TOPICS:
        configs = {"cleanup.policy": "compact"} if "compact" in name else None
        fuzz_cluster.create_topic(name, partitions, rf, configs)
    with sync_channel(fuzz_cluster.gateway_address) as channel:
        stub = gateway_pb2_grpc.GatewayStub(channel)
        committed = stub.OffsetCommit(
            coordinator_pb2.OffsetCommitRequest(
                group_id=POOL_GROUP,
                generation_id=-1,
                topics=[
                    coordinator_pb2.OffsetCommitTopic(
                        name="fuzz-a",
                        partitions=[coordinator_pb2.OffsetCommitPartition(committed_offset=0)],
                    )
                ],
            ),
            timeout=30,
            metadata=PROBE_CLIENT,
        )
        assert committed.error_code == 0, committed
        user = stub.UpsertUser(
            admin_pb2.UpsertUserRequest(name=POOL_USER, password="fuzz-password"),
            timeout=30,
            metadata=PROBE_CLIENT,
        )
        assert user.error_code == 0, user
    return Pool(
        topics=[name for name, _, _ in POOL_TOPICS] + ["__consumer_offsets"],
        groups=[POOL_GROUP],
        users=[POOL_USER],
    )


@pytest.fixture(scope="module")
def probe(fuzz_cluster: LocalCluster) -> Iterator[Probe]:
    topic = unique_topic_name("fuzz-control")
    fuzz_cluster.create_topic(topic, partitions=1, replication_factor=2)
    p = Probe(fuzz_cluster.gateway_address, topic)
    p.check()
    yield p
    p.close()
