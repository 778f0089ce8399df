"""Fixtures of the reassignment integration tests: a local cluster of real processes (etcd, two
metadata instances, four storage nodes, one gateway) with short session and lag times, and its
harness. The modules that kill or pause none of its processes (test_reassignment_cli.py,
test_reassignment_move.py) share one such cluster (`reassign_cluster`, shared_clusters.py:
started for the first of their tests, stopped by PID after the last), so they name their
topics per test; test_reassignment_faults.py, which kills and pauses its nodes, and
test_reassignment_throttle.py start their own."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reassign_harness import ReassignHarness
from reassign_harness import reassign_cluster as make_reassign_cluster
from shared_clusters import shared_cluster

from riverlog.cluster import LocalCluster

REASSIGN_CLUSTER = shared_cluster("reassign_cluster", make_reassign_cluster)


@pytest.fixture(scope="module", name="reassign_cluster")
def shared_reassign_cluster(tmp_path_factory: pytest.TempPathFactory) -> LocalCluster:
    return REASSIGN_CLUSTER.get(tmp_path_factory)


@pytest.fixture(scope="module")
def harness(reassign_cluster: LocalCluster) -> Iterator[ReassignHarness]:
    with ReassignHarness(reassign_cluster) as h:
        yield h
