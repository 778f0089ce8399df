"""Fixtures of the consumer-group integration tests. test_groups.py runs on the session cluster
(tests/integration/conftest.py: one coordinator, members may ask for session timeouts down to
500 ms and a group's first rebalance does not wait), with topics and groups named per test and
nothing done to the cluster's processes (its members are processes of the test's own);
test_groups_failover.py kills a coordinator, so it starts a cluster of its own. Helpers are in
`group_support.py`."""

from __future__ import annotations

import pytest

from riverlog.cluster import LocalCluster


@pytest.fixture(scope="session")
def bootstrap(cluster: LocalCluster) -> str:
    return cluster.gateway_address
