"""A cluster of their own for the quota tests: two gateways and two quota instances, so entities
are sharded between them (the session cluster has neither), one metadata instance and two
storage nodes. One cluster serves every module that takes `quota_cluster` (shared_clusters.py:
started for the first of their tests, stopped by PID after the last), so those modules share its
rules: users, client ids and topics are named per test (no default-entity quota is left set),
and no test kills, pauses or reconfigures its processes (a test that does starts its own
LocalCluster, as test_quota_service_down.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_clusters import shared_cluster

from riverlog.cluster import LocalCluster


def _quota_cluster(root: Path) -> LocalCluster:
    return LocalCluster(root, storage_nodes=2, metadata_nodes=1, gateways=2, quota_nodes=2)


QUOTA_CLUSTER = shared_cluster("quota_cluster", _quota_cluster)


@pytest.fixture(scope="module")
def quota_cluster(tmp_path_factory: pytest.TempPathFactory) -> LocalCluster:
    return QUOTA_CLUSTER.get(tmp_path_factory)
