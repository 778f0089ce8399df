"""The real gateway's half of the contract suite (`tests/unit/client/gateway_contract.py`):
the cases the SDK's fake gateways pass, against the gateway of the session cluster (its
coordinator serves the group cases; a group's first rebalance does not wait there), so a fake
that says something the gateway does not fails here. Every case names its topics and its group
itself, as the shared cluster asks."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from riverlog.cluster import LocalCluster, unique_topic_name

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "client"))
from gateway_contract import CASES, Target

pytestmark = pytest.mark.integration


@pytest.fixture
def real_target(cluster: LocalCluster) -> Target:
    return Target(cluster.gateway_address, unique_topic_name, unique_topic_name("contract-group"))


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.__name__)
def test_real_gateway_keeps_the_contract(
    case: Callable[[Target], None], real_target: Target
) -> None:
    case(real_target)
