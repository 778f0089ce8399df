"""`riverlog cluster up | status | down` on a data directory of its own (not the session
cluster): up returns once ready and prints the gateway, status reports every process and the
controller, and down leaves no process behind."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cli_runner import cli_env, run_riverlog

from riverlog.cluster.process import pid_running

pytestmark = pytest.mark.integration


def wait_gone(pids: list[int], timeout: float = 15.0) -> list[int]:
    """PIDs still running after `timeout` (zombies awaiting their reaper count as gone)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = [pid for pid in pids if pid_running(pid)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


def test_up_status_down(tmp_path: Path) -> None:
    data_dir = tmp_path / "own-cluster"
    env = cli_env(tmp_path / "home", bootstrap=None)

    def riverlog(*args: str, input: str | None = None):
        return run_riverlog(args, env, input)

    pids: list[int] = []
    try:
        up = riverlog("cluster", "up", "--data-dir", str(data_dir), "--storage-nodes", "2",
                      "--metadata-nodes", "2", "--gateways", "1", "--quota-nodes", "0",
                      "--coordinators", "0")  # fmt: skip
        assert up.returncode == 0, up.stderr
        state = json.loads((data_dir / "cluster.json").read_text())
        pids = [p["pid"] for p in state["processes"]]
        gateway = next(p["address"] for p in state["processes"] if p["role"] == "gateway")
        assert up.stdout.strip() == gateway

        again = riverlog("cluster", "up", "--data-dir", str(data_dir))
        assert again.returncode == 1 and "already running" in again.stderr

        status = riverlog("cluster", "status", "--data-dir", str(data_dir), "--json")
        assert status.returncode == 0, status.stderr
        document = json.loads(status.stdout)
        roles = sorted(
            (p["role"], p["node_id"]) for p in document["processes"] if p["role"] != "etcd"
        )
        assert roles == [("gateway", 1), ("metadata", 1), ("metadata", 2), ("storage", 1),
                         ("storage", 2)]  # fmt: skip
        assert all(p["alive"] and p["pid"] > 0 for p in document["processes"])
        services = [p for p in document["processes"] if p["role"] != "etcd"]
        assert all(str(p["metrics"]).startswith("http://127.0.0.1:") for p in services)
        assert all(str(p["metrics"]).endswith("/metrics") for p in services)
        view = document["cluster"]
        assert view["controller_id"] in (1, 2) and view["controller_epoch"] >= 1
        assert view["offline_partitions"] == 0 and view["under_replicated_partitions"] == 0
        live = {(n["kind"], n["node_id"]) for n in view["live_nodes"]}
        assert {("storage", 1), ("storage", 2), ("gateway", 1)} <= live

        text = riverlog("cluster", "status", "--data-dir", str(data_dir))
        assert text.returncode == 0 and "Controller: metadata instance" in text.stdout
        assert "Partitions: 0 offline, 0 under-replicated" in text.stdout

        # The local cluster is the default bootstrap when its data dir is RIVERLOG_HOME.
        home_env = {**env, "RIVERLOG_HOME": str(data_dir)}
        listed = run_riverlog(("topics", "list", "--json"), home_env)
        assert listed.returncode == 0 and json.loads(listed.stdout) == []

        down = riverlog("cluster", "down", "--data-dir", str(data_dir))
        assert down.returncode == 0, down.stderr
        assert wait_gone(pids) == []

        after = riverlog("cluster", "status", "--data-dir", str(data_dir), "--json")
        assert after.returncode == 1
        assert not any(p["alive"] for p in json.loads(after.stdout)["processes"])
        assert riverlog("cluster", "down", "--data-dir", str(data_dir)).returncode == 0
    finally:
        if any(pid_running(pid) for pid in pids):
            from riverlog.cluster import LocalCluster

            LocalCluster.attach(data_dir).stop(grace=2)


def test_status_without_a_cluster(tmp_path: Path) -> None:
    env = cli_env(tmp_path, bootstrap=None)
    done = run_riverlog(("cluster", "status", "--data-dir", str(tmp_path / "none")), env)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        f"riverlog: error: no local cluster in {tmp_path / 'none'} (start one: riverlog cluster up)"
    ]
