"""Fixtures of the reassignment integration tests: a module-scoped local cluster of real
processes (etcd, two metadata instances, four storage nodes, one gateway) with short session and
lag times, and its harness."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reassign_harness import ReassignHarness, start_reassign_cluster


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReassignHarness]:
    cluster = start_reassign_cluster(tmp_path_factory.mktemp("reassign-cluster"))
    try:
        with ReassignHarness(cluster) as h:
            yield h
    finally:
        cluster.stop()
