"""Fixtures of the fault tests: every test starts a cluster of its own (real etcd, metadata,
storage and gateway processes on loopback, short leases) in its own tmp dir, and that cluster
is always stopped by PID at teardown, whether the test passed, failed or timed out. Every test
here that starts a cluster is marked `fault` and `slow`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from riverlog.cluster import LocalCluster

sys.path.insert(0, str(Path(__file__).resolve().parent))
from faults import lease_config

FAULT_DIR = Path(__file__).resolve().parent
START_TIMEOUT_S = 60.0

StartCluster = Callable[..., LocalCluster]
SUMMARIES: list[str] = []


@pytest.fixture
def fault_summary() -> Callable[[str], None]:
    """`fault_summary(line)`: a line for the end-of-run table of the fault tests (records
    checked, unavailability), printed even without `-s`."""
    return SUMMARIES.append


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if SUMMARIES:
        terminalreporter.section("fault tests: records checked and unavailability")
        for line in SUMMARIES:
            terminalreporter.write_line(line)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `fault` and `slow` every test here that starts a cluster (not the checker's own
    tests, which run on synthetic histories)."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if FAULT_DIR in item.path.resolve().parents and "start_cluster" in fixtures:
            for marker in ("fault", "slow"):
                if not item.get_closest_marker(marker):
                    item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[StartCluster]:
    """Factory: `start_cluster(storage_nodes=3, metadata_nodes=2)` starts a LocalCluster with
    the fault tests' short leases in this test's tmp dir; all are stopped at teardown."""
    started: list[LocalCluster] = []

    def start(storage_nodes: int = 3, metadata_nodes: int = 2) -> LocalCluster:
        cluster = LocalCluster(
            tmp_path / f"cluster-{len(started)}",
            storage_nodes=storage_nodes,
            metadata_nodes=metadata_nodes,
            gateways=1,
            extra_config=lease_config(),
        )
        started.append(cluster)
        cluster.start(timeout=START_TIMEOUT_S)
        return cluster

    try:
        yield start
    finally:
        for cluster in started:
            cluster.stop(grace=5.0)
