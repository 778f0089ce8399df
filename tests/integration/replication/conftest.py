"""Fixtures of the replication integration tests: a module-scoped local cluster of real
processes (etcd, one metadata instance, three storage nodes; no gateway) with short lease and
lag times so that failures are noticed within seconds, and its harness; `any_harness`, that
harness and then one over the shared TLS cluster (`tls_cluster`, tests/integration/conftest.py)
for a test that leaves every process alone."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from replication_harness import ReplicationHarness, start_replication_cluster

from riverlog.cluster import LocalCluster
from riverlog.common.rpc.channel import tls_channel_credentials


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReplicationHarness]:
    cluster = start_replication_cluster(tmp_path_factory.mktemp("replication-cluster"))
    try:
        yield ReplicationHarness(cluster)
    finally:
        cluster.stop()


@pytest.fixture(params=["harness", "tls_cluster"], ids=["plaintext", "tls"])
def any_harness(request: pytest.FixtureRequest) -> ReplicationHarness:
    """The module's harness, then a harness over the shared TLS cluster (every channel
    encrypted; the test speaks to it with a certificate of its CA, CN=tls-test). The TLS
    cluster is shared: a test that takes this fixture kills, pauses and restarts nothing."""
    if request.param == "harness":
        harness: ReplicationHarness = request.getfixturevalue("harness")
        return harness
    cluster: LocalCluster = request.getfixturevalue("tls_cluster")
    paths = cluster.certificates.for_process("tls-test", ["127.0.0.1"])
    credentials = tls_channel_credentials(str(paths.ca), str(paths.certificate), str(paths.key))
    return ReplicationHarness(cluster, credentials)
