"""Placements (where each process runs): the launcher asks the placement for each process's
host, command wrapper and environment, the wrapper execs the service so the recorded PID is the
service's own, and the state file keeps the wrapper. Against the stand-in services; the network
namespace placement itself is exercised by tests/fault/test_network_faults.py."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from riverlog.cluster import LocalCluster
from riverlog.cluster.netns import NetnsPlacement, netns_unavailable

FAKES = Path(__file__).parent / "fakes"
MODULES = dict.fromkeys(("metadata", "storage", "gateway"), "riverlog_fake_service")
ENV = shutil.which("env") or "/usr/bin/env"


class Wrapped:
    """Every process on loopback, started through `env MARK=<name>` (which execs it)."""

    private_ports = False

    def __init__(self) -> None:
        self.asked: list[str] = []

    def host(self, name: str) -> str:
        self.asked.append(name)
        return "127.0.0.1"

    def wrapper(self, name: str) -> tuple[str, ...]:
        return (ENV, f"RIVERLOG_PLACED={name}")

    def env(self, name: str) -> Mapping[str, str]:
        return {"RIVERLOG_PLACEMENT_ENV": name}


def test_the_launcher_places_each_process_as_the_placement_says(tmp_path: Path) -> None:
    placement = Wrapped()
    cluster = LocalCluster(
        tmp_path / "c",
        storage_nodes=1,
        metadata_nodes=1,
        etcd_url="http://127.0.0.1:1",
        service_modules=MODULES,
        env={"PYTHONPATH": str(FAKES)},
        placement=placement,
    )
    try:
        cluster.start(timeout=60)
        assert sorted(placement.asked) == ["gateway-1", "metadata-1", "storage-1"]
        storage = cluster.storage(1)
        assert storage.spec.wrapper == (ENV, "RIVERLOG_PLACED=storage-1")
        assert storage.spec.env["RIVERLOG_PLACEMENT_ENV"] == "storage-1"
        assert storage.spec.env["PYTHONPATH"] == str(FAKES)
        # env execs the service: the PID the launcher holds runs the service's own argv
        cmdline = Path(f"/proc/{storage.pid}/cmdline").read_bytes().split(b"\0")[:-1]
        assert [a.decode() for a in cmdline[1:]] == list(storage.spec.args[1:])
        environ = Path(f"/proc/{storage.pid}/environ").read_bytes().split(b"\0")
        assert b"RIVERLOG_PLACED=storage-1" in environ
        state = json.loads((cluster.data_dir / "cluster.json").read_text())
        saved = {p["name"]: p for p in state["processes"]}
        assert saved["storage-1"]["wrapper"] == [ENV, "RIVERLOG_PLACED=storage-1"]
        attached = LocalCluster.attach(cluster.data_dir)
        assert attached.storage(1).alive  # the recorded PID still matches its command line
    finally:
        cluster.stop(grace=5)
    assert not cluster.running


@pytest.mark.skipif(bool(netns_unavailable()), reason=str(netns_unavailable()))
def test_a_netns_placement_removes_everything_it_made() -> None:
    from riverlog.cluster.netns import _links, _namespaces

    with NetnsPlacement() as placement:
        a, b = placement.host("a"), placement.host("b")
        assert a != b and a.startswith("10.77.") and placement.host("a") == a
        assert placement.wrapper("a")[:3] == ("ip", "netns", "exec")
        namespaces = [placement.namespace("a"), placement.namespace("b")]
        assert set(namespaces) <= set(_namespaces())
        assert f"inet {a}/24" in placement.exec("a", ["ip", "-o", "addr", "show", "eth0"])
    assert not set(namespaces) & set(_namespaces())
    assert not any(name.startswith(f"rlft-{placement.subnet}-") for name, _ in _links())


@pytest.mark.skipif(bool(netns_unavailable()), reason=str(netns_unavailable()))
def test_leftovers_of_a_dead_owner_are_found_and_removed() -> None:
    import subprocess

    from riverlog.cluster.netns import find_leftovers, remove_leftovers

    dead = subprocess.Popen(["true"])
    dead.wait()  # its PID now names no process: whatever it owned is a leftover
    name = f"rlft-{dead.pid}-199-storage-9"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        with NetnsPlacement() as live:
            live.host("a")  # a live owner's namespace is never a leftover
            found = find_leftovers()
            assert name in found.namespaces
            assert live.namespace("a") not in found.namespaces
            remove_leftovers(found)
            assert name not in find_leftovers().namespaces
    finally:
        subprocess.run(["ip", "netns", "delete", name], check=False, capture_output=True)
