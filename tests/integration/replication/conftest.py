"""Fixtures of the replication integration tests: a module-scoped local cluster of real
processes (etcd, one metadata instance, three storage nodes; no gateway) with short lease and
lag times so that failures are noticed within seconds, and its harness."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replication_harness import ReplicationHarness, start_replication_cluster


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicationHarness]:
    cluster = start_replication_cluster(tmp_path_factory.mktemp("replication-cluster"))
    try:
        yield ReplicationHarness(cluster)
    finally:
        cluster.stop()
