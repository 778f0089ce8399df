"""The real gateway's half of the contract suite (`tests/unit/client/gateway_contract.py`):
the cases the SDK's fake gateways pass, against the gateway of a real cluster, so a fake that
says something the gateway does not fails here. The session cluster has no group coordinator,
so this module starts its own (one storage node and one coordinator, no initial rebalance
delay), stopped by PID at the end as every LocalCluster is."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from riverlog.cluster import LocalCluster, unique_topic_name

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "client"))
from gateway_contract import CASES, Target

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def contract_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("contract"),
        storage_nodes=1,
        metadata_nodes=1,
        gateways=1,
        coordinators=1,
        extra_config={
            "metadata": {"offsets.topic.num.partitions": "2"},
            "coordinator": {"group.initial.rebalance.delay.ms": "0"},
        },
    ) as local:
        yield local


@pytest.fixture
def real_target(contract_cluster: LocalCluster) -> Target:
    return Target(
        contract_cluster.gateway_address, unique_topic_name, unique_topic_name("contract-group")
    )


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_real_gateway_keeps_the_contract(
    case: Callable[[Target], None], real_target: Target
) -> None:
    case(real_target)
