"""The transaction cluster shared by the transaction tests that leave its processes alone
(test_transaction_coordinator.py, test_transactional_clients.py: `shared_txn_cluster`, started
for the first of their tests and stopped by PID after the last, shared_clusters.py); each names
its topics and transactional ids after a topic of its own. The modules that kill a coordinator
or a storage node start their own (`txn_cluster.txn_cluster`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from shared_clusters import shared_cluster
from txn_cluster import TXN_CLUSTER_CONFIG, TXN_CLUSTER_SHAPE

from riverlog.cluster import LocalCluster


def _txn_cluster(root: Path) -> LocalCluster:
    return LocalCluster(root, **TXN_CLUSTER_SHAPE, extra_config=TXN_CLUSTER_CONFIG)


SHARED_TXN_CLUSTER = shared_cluster("shared_txn_cluster", _txn_cluster)


@pytest.fixture(scope="module")
def shared_txn_cluster(tmp_path_factory: pytest.TempPathFactory) -> LocalCluster:
    return SHARED_TXN_CLUSTER.get(tmp_path_factory)
