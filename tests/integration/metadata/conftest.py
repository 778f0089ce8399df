"""Fixtures for metadata integration tests: one real etcd per module (stopped by PID), and a
factory of metadata clusters whose processes are stopped by PID at teardown."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from etcd_fixture import EtcdServer
from metadata_procs import MetadataCluster


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    server = EtcdServer(tmp_path_factory.mktemp("etcd")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def cluster_factory(etcd: EtcdServer, tmp_path: Path) -> Iterator[Callable[..., MetadataCluster]]:
    clusters: list[MetadataCluster] = []

    def make(count: int = 3, configs: dict[str, str] | None = None) -> MetadataCluster:
        cluster = MetadataCluster(etcd, tmp_path)
        clusters.append(cluster)
        return cluster.start(count, configs)

    try:
        yield make
    finally:
        for cluster in clusters:
            cluster.stop()
