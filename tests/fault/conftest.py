"""Fixtures of the fault tests: every test starts a cluster of its own (real etcd, metadata,
storage and gateway processes on loopback, short leases) in its own tmp dir, and that cluster
is always stopped by PID at teardown, whether the test passed, failed or timed out. Every test
here that starts a cluster is marked `fault` and `slow`.

`start_net_cluster` places each process in a network namespace of its own (issue 12; see
`riverlog.cluster.netns` and `net.py`), optionally with a steppable clock (`clock.py`) and a
small tmpfs log dir per storage node (`disk.py`). Before the first such cluster of a session
it looks for namespaces, links and mounts an earlier run left (their owner PID is gone):
it removes them, and refuses to start if any remain. At teardown it stops the processes by
PID, then removes every namespace, link, rule, helper and mount it made.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from riverlog.cluster import LocalCluster
from riverlog.cluster.netns import (
    NetnsPlacement,
    find_leftovers,
    netns_unavailable,
    remove_leftovers,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from clock import Clocks, compiler
from disk import SmallDisks, leftover_mounts, unmount
from faults import lease_config
from net import Network

FAULT_DIR = Path(__file__).resolve().parent
START_TIMEOUT_S = 60.0
# A fault test's cluster is thrown away once the test has checked it: teardown SIGKILLs it
# (by PID, each tier at once) instead of waiting out every clean shutdown (~2-4 s a cluster);
# clean shutdown is what tests/integration's cluster and coordinator shutdown tests check.
TEARDOWN_GRACE_S = 0.0

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
        starts = {"start_cluster", "start_net_cluster"} & set(fixtures)
        if FAULT_DIR in item.path.resolve().parents and starts:
            for marker in ("fault", "slow"):
                if not item.get_closest_marker(marker):
                    item.add_marker(getattr(pytest.mark, marker))


@pytest.fixture
def start_cluster(tmp_path: Path) -> Iterator[StartCluster]:
    """Factory: `start_cluster(storage_nodes=3, metadata_nodes=2, coordinators=0,
    extra_config=None)` starts a LocalCluster with the fault tests' short leases (plus
    `extra_config`) in this test's tmp dir; all are stopped at teardown."""
    started: list[LocalCluster] = []

    def start(
        storage_nodes: int = 3,
        metadata_nodes: int = 2,
        coordinators: int = 0,
        extra_config: Mapping[str, Mapping[str, str]] | None = None,
    ) -> LocalCluster:
        config = lease_config()
        for role, values in (extra_config or {}).items():
            config.setdefault(role, {}).update(values)
        cluster = LocalCluster(
            tmp_path / f"cluster-{len(started)}",
            storage_nodes=storage_nodes,
            metadata_nodes=metadata_nodes,
            gateways=1,
            extra_config=config,
            coordinators=coordinators,
        )
        started.append(cluster)
        cluster.start(timeout=START_TIMEOUT_S)
        return cluster

    try:
        yield start
    finally:
        for cluster in started:
            cluster.stop(grace=TEARDOWN_GRACE_S)


# ---- clusters in network namespaces ---------------------------------------------------------


def net_tools_missing() -> str | None:
    """Why the network fault tests cannot run here (None: they can)."""
    why = netns_unavailable()
    if why:
        return why
    if shutil.which("iptables-restore") is None:
        return "iptables is not installed (make faults installs it: apt-get install iptables)"
    return None


@pytest.fixture(scope="session")
def clean_netns() -> str:
    """Once per session: skip without root/iproute2/iptables; remove what an earlier run left
    (namespaces, links, mounts whose owner PID is gone) and refuse to start if any remain."""
    why = net_tools_missing()
    if why:
        pytest.skip(f"network fault tests need root, iproute2 and iptables: {why}")
    leftovers, mounts = find_leftovers(), leftover_mounts()
    if leftovers or mounts:
        note = f"[fault] removed leftovers of an earlier run: {leftovers}, mounts {mounts}"
        SUMMARIES.append(note)
        for point in mounts:
            unmount(point)
        remove_leftovers(leftovers)
        still, still_mounts = find_leftovers(), leftover_mounts()
        if still or still_mounts:
            pytest.fail(f"refusing to start: leftovers remain: {still}, mounts {still_mounts}")
    return "clean"


@dataclass
class NetCluster:
    """A cluster in network namespaces and the handles its faults need."""

    cluster: LocalCluster
    placement: NetnsPlacement
    net: Network
    clocks: Clocks | None
    disks: SmallDisks | None
    run_dir: Path

    def name_of(self, role: str, node_id: int) -> str:
        return f"{role}-{node_id}"

    def log_dir(self, node_id: int) -> Path:
        return self.cluster.data_dir / "data" / f"storage-{node_id}"


StartNetCluster = Callable[..., NetCluster]


@pytest.fixture
def start_net_cluster(tmp_path: Path, clean_netns: str) -> Iterator[StartNetCluster]:
    """Factory: `start_net_cluster(storage_nodes=3, metadata_nodes=3, clocks=False,
    disk_mb=None)` starts a LocalCluster whose every process has its own namespace and
    address (clients reach it over the bridge); `clocks` starts metadata and storage
    processes with a steppable clock, `disk_mb` gives each storage node a tmpfs log dir of
    that size. Everything is stopped and removed at teardown, pass or fail."""
    made: list[NetCluster] = []

    def start(
        storage_nodes: int = 3,
        metadata_nodes: int = 3,
        clocks: bool = False,
        disk_mb: int | None = None,
        extra_config: dict[str, dict[str, str]] | None = None,
    ) -> NetCluster:
        if clocks and compiler() is None:
            pytest.skip("clock steps need a C compiler (cc) to build tests/fault/clockstep.c")
        root = tmp_path / f"netcluster-{len(made)}"
        run_dir = root / "fault-run"
        run_dir.mkdir(parents=True)
        placement = NetnsPlacement()
        config = lease_config()
        for role, values in (extra_config or {}).items():
            config.setdefault(role, {}).update(values)
        cluster = LocalCluster(
            root, storage_nodes, metadata_nodes, gateways=1, extra_config=config,
            placement=placement,
        )  # fmt: skip
        handle = NetCluster(
            cluster,
            placement,
            Network(placement, run_dir),
            Clocks(run_dir) if clocks else None,
            SmallDisks(disk_mb) if disk_mb else None,
            run_dir,
        )
        made.append(handle)
        placement.open()
        if handle.clocks is not None:
            names = [f"metadata-{i}" for i in range(1, metadata_nodes + 1)]
            names += [f"storage-{i}" for i in range(1, storage_nodes + 1)]
            for name in names:
                placement.set_env(name, handle.clocks.env(name))
        if handle.disks is not None:
            for node in range(1, storage_nodes + 1):
                handle.disks.mount(handle.log_dir(node))
        cluster.start(timeout=START_TIMEOUT_S)
        return handle

    try:
        yield start
    finally:
        for handle in made:
            try:
                handle.cluster.stop(grace=TEARDOWN_GRACE_S)
            finally:
                handle.net.close()
                if handle.disks is not None:
                    handle.disks.unmount_all()
                handle.placement.close()
        remaining = [r for h in made for r in h.placement.remaining()]
        mounts = [m for h in made if h.disks for m in h.disks.remaining()]
        assert not remaining and not mounts, f"teardown left {remaining} {mounts}"
