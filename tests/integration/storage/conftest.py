"""Fixtures of the storage integration tests: a module-scoped local cluster of real processes
(etcd, one metadata instance, two storage nodes; no gateway) and its harness."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from storage_harness import StorageHarness, start_cluster


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StorageHarness]:
    cluster = start_cluster(tmp_path_factory.mktemp("storage-cluster"), storage_nodes=2)
    try:
        yield StorageHarness(cluster)
    finally:
        cluster.stop()
