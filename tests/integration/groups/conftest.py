"""Fixtures of the consumer-group integration tests: one real cluster per module with group
coordinators (etcd, one metadata instance, three storage nodes, two coordinators, one gateway;
`__consumer_offsets` with 6 partitions, the coordinators' minimum session timeout and initial
rebalance delay lowered so member deaths are noticed in seconds). Helpers are in
`group_support.py`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from riverlog.cluster import LocalCluster


@pytest.fixture(scope="module")
def group_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("groups"),
        storage_nodes=3,
        metadata_nodes=1,
        gateways=1,
        coordinators=2,
        extra_config={
            "metadata": {"offsets.topic.num.partitions": "6"},
            "coordinator": {
                "group.min.session.timeout.ms": "500",
                "group.initial.rebalance.delay.ms": "0",
            },
        },
    ) as local:
        yield local


@pytest.fixture(scope="module")
def bootstrap(group_cluster: LocalCluster) -> str:
    return group_cluster.gateway_address
