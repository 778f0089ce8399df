"""A cluster of its own for the quota tests: two gateways and two quota instances, so entities
are sharded between them (the session cluster has neither), one metadata instance and two
storage nodes, stopped by PID at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from riverlog.cluster import LocalCluster


@pytest.fixture(scope="module")
def quota_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        tmp_path_factory.mktemp("quota-cluster"),
        storage_nodes=2,
        metadata_nodes=1,
        gateways=2,
        quota_nodes=2,
    ) as local:
        yield local
