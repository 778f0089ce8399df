"""LocalCluster with the real services, on a cluster of its own: single processes killed,
paused and restarted as fault tests will do it, and a restarted process back on its old port
so the addresses its peers were given stay valid."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from riverlog.cluster import LocalCluster
from riverlog.cluster.process import pid_running
from riverlog.common.errors import RiverlogError

pytestmark = pytest.mark.integration


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path / "c", storage_nodes=2, metadata_nodes=1, gateways=1)
    try:
        cluster.start(timeout=120)
        yield cluster
    finally:
        cluster.stop()
    assert not cluster.running


def test_kill_and_restart_a_storage_node_on_its_old_ports(own_cluster: LocalCluster) -> None:
    node = own_cluster.storage(2)
    old_pid, old_address = node.pid, node.address
    old_zero_copy, old_direct = node.info["zero_copy_port"], node.info["direct_port"]
    assert old_direct > 0  # the launcher's clusters have direct access (decision 0047)
    node.kill(signal.SIGKILL)
    assert not node.alive and not pid_running(old_pid or 0)
    node.restart(timeout=60)
    assert node.pid != old_pid and node.alive
    assert node.address == old_address and node.info["zero_copy_port"] == old_zero_copy
    assert node.info["direct_port"] == old_direct  # clients' metadata stays valid
    view = own_cluster.wait_ready(60)
    assert view is not None and view.storage_nodes == {1, 2}
    state = json.loads((own_cluster.data_dir / "cluster.json").read_text())
    assert {p["name"]: p["pid"] for p in state["processes"]}["storage-2"] == node.pid


def test_restart_metadata_and_gateway_keep_their_addresses(own_cluster: LocalCluster) -> None:
    metadata = own_cluster.metadata(1)
    gateway = own_cluster.gateway(1)
    addresses = (metadata.address, gateway.address)
    metadata.restart(timeout=60)
    gateway.restart(timeout=60)
    assert (metadata.address, gateway.address) == addresses
    view = own_cluster.wait_ready(60)
    assert view is not None and view.controller_id == 1 and view.storage_nodes == {1, 2}
    own_cluster.create_topic("after-restart", partitions=2, replication_factor=2)


def test_a_paused_gateway_answers_nothing_until_resumed(own_cluster: LocalCluster) -> None:
    gateway = own_cluster.gateway(1)
    gateway.pause()
    try:
        assert gateway.alive
        with pytest.raises(RiverlogError):
            own_cluster.describe_cluster(timeout=1.0)
    finally:
        gateway.resume()
    assert own_cluster.describe_cluster(timeout=10.0).controller_id == 1


def test_stop_by_pid_from_another_handle(own_cluster: LocalCluster) -> None:
    pids = [p.pid for p in own_cluster.processes.values()]
    LocalCluster.attach(own_cluster.data_dir).stop()
    assert not any(pid_running(pid or 0) for pid in pids)
    assert not own_cluster.running
