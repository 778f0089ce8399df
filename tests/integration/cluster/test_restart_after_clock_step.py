"""Incarnations do not come from the wall clock (decision 0003): a storage node, gateway,
coordinator and quota instance, each killed with -9 and started again at once with its wall
clock stepped 10 minutes back (tests/fault's LD_PRELOAD clock shim) while its previous
registration is still live, each rejoin as a newer incarnation instead of being refused with
NODE_ID_IN_USE (which is what a start time in ns as incarnation did)."""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest

from riverlog.cluster import LocalCluster
from riverlog.common.cluster.convert import kind_from_proto
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import admin_pb2, metadata_pb2_grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fault"))
from clock import Clocks, compiler  # tests/fault: the clock-step shim

pytestmark = [pytest.mark.integration, pytest.mark.slow]

STEPPED = ("storage-1", "gateway-1", "coordinator-1", "quota-1")
BACK_S = -600


class SteppedClocks:
    """Placement on 127.0.0.1 with the clock shim preloaded into the STEPPED processes."""

    private_ports = False

    def __init__(self, clocks: Clocks) -> None:
        self.clocks = clocks

    def host(self, name: str) -> str:
        return "127.0.0.1"

    def wrapper(self, name: str) -> tuple[str, ...]:
        return ()

    def env(self, name: str) -> Mapping[str, str]:
        return self.clocks.env(name) if name in STEPPED else {}


def incarnations(cluster: LocalCluster) -> dict[str, int]:
    """`kind-id` → incarnation of every registered node."""
    with sync_channel(cluster.metadata_addresses[0]) as channel:
        stub = metadata_pb2_grpc.MetadataServiceStub(channel)
        reply = stub.DescribeCluster(admin_pb2.DescribeClusterRequest(), timeout=10)
    return {f"{kind_from_proto(n.kind)}-{n.node_id}": n.incarnation for n in reply.nodes}


@pytest.mark.timeout(300)
def test_each_node_kind_rejoins_after_a_restart_with_its_clock_stepped_back(
    tmp_path: Path,
) -> None:
    if compiler() is None:
        pytest.skip("no C compiler to build the clock shim")
    run_dir = tmp_path / "clocks"
    run_dir.mkdir()
    clocks = Clocks(run_dir)
    with LocalCluster(
        tmp_path / "cluster",
        storage_nodes=1,
        metadata_nodes=1,
        gateways=1,
        quota_nodes=1,
        coordinators=1,
        # Long sessions: the previous registration is surely live when the new one comes.
        extra_config={"metadata": {"broker.session.timeout.ms": "60000"}},
        placement=SteppedClocks(clocks),
    ) as cluster:
        for name in STEPPED:
            before = incarnations(cluster)[name]
            clocks.jump(name, BACK_S)
            process = cluster.processes[name]
            process.kill()
            process.restart(timeout=60)
            deadline = time.monotonic() + 60
            while incarnations(cluster).get(name, before) <= before:
                assert process.alive, f"{name} exited (refused?) after the clock step"
                assert time.monotonic() < deadline, f"{name} did not register again"
                time.sleep(0.2)
            assert process.alive
