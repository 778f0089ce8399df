"""LocalCluster against stand-in services (tests/unit/cluster/fakes): start order, ready files,
the state file and attach, kill/pause/resume/restart of one process, stop by PID, and clean-up
when a process fails to start. The real services are exercised in tests/integration."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from riverlog.cluster import ClusterError, ClusterNotFoundError, LocalCluster, ProcessStartError
from riverlog.cluster.process import pid_running, process_state

FAKES = Path(__file__).parent / "fakes"
MODULES = dict.fromkeys(("metadata", "storage", "gateway"), "riverlog_fake_service")
FAKE_ETCD = "http://127.0.0.1:1"  # the fakes never talk to etcd


def make_cluster(tmp_path: Path, **kwargs) -> LocalCluster:
    env = {"PYTHONPATH": str(FAKES), **kwargs.pop("env", {})}
    kwargs.setdefault("etcd_url", FAKE_ETCD)
    return LocalCluster(tmp_path / "c", service_modules=MODULES, env=env, **kwargs)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """One cluster of stand-ins for the tests below, in file order: they leave it running as
    they found it (a killed or restarted process is running again), and the last one stops
    it."""
    c = make_cluster(
        tmp_path_factory.mktemp("launcher"),
        storage_nodes=2,
        metadata_nodes=2,
        gateways=1,
        racks=["r1", "r2"],
        extra_config={"storage": {"log.segment.bytes": "1024"}},
    )
    try:
        c.start(timeout=60)
        yield c
    finally:
        c.stop(grace=5)


def test_start_runs_every_role_with_the_agreed_command_line(cluster: LocalCluster) -> None:
    assert sorted(cluster.processes) == [
        "gateway-1",
        "metadata-1",
        "metadata-2",
        "storage-1",
        "storage-2",
    ]
    assert all(p.alive for p in cluster.processes.values())
    storage = cluster.storage(2)
    args = storage.spec.args
    assert args[1:3] == ("-m", "riverlog_fake_service")
    assert args[args.index("--node-id") + 1] == "2"
    assert args[args.index("--metadata") + 1] == ",".join(cluster.metadata_addresses)
    assert args[args.index("--rack") + 1] == "r2"
    configs = [args[i + 1] for i, arg in enumerate(args) if arg == "--config"]
    # the cluster's direct-access key (decision 0047; made once, 0600), /metrics on a free
    # port; extra_config comes after (and wins)
    key = cluster.data_dir / "direct-access.key"
    assert configs == [
        f"direct.access.secret.key.file={key}",
        "metrics.prometheus.port=0",
        "log.segment.bytes=1024",
    ]
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_text().strip()) == 64
    assert args[args.index("--direct-port") + 1] == "0"
    gateway_args = cluster.gateway(1).spec.args
    assert f"direct.access.secret.key.file={key}" in gateway_args
    assert not [a for a in cluster.metadata(1).spec.args if a.startswith("direct.")]
    assert Path(args[args.index("--log-dirs") + 1]).is_dir()
    meta_args = cluster.metadata(1).spec.args
    assert meta_args[meta_args.index("--etcd") + 1] == FAKE_ETCD
    assert cluster.gateway_address == cluster.gateway(1).address
    assert cluster.bootstrap_servers == cluster.gateway_address
    assert len(cluster.metadata_addresses) == 2
    view = cluster.wait_ready(10)
    assert view is not None and view.storage_nodes == {1, 2}


def test_state_file_lets_another_process_find_everything(cluster: LocalCluster) -> None:
    state = json.loads((cluster.data_dir / "cluster.json").read_text())
    by_name = {p["name"]: p for p in state["processes"]}
    assert by_name["storage-1"]["pid"] == cluster.storage(1).pid
    assert by_name["gateway-1"]["address"] == cluster.gateway_address
    attached = LocalCluster.attach(cluster.data_dir)
    assert attached.gateway_address == cluster.gateway_address
    assert attached.etcd_url == FAKE_ETCD
    assert all(p.alive for p in attached.processes.values())
    assert attached.layout.racks == ["r1", "r2"]


def test_kill_pause_resume_and_restart_one_process(cluster: LocalCluster) -> None:
    node = cluster.storage(1)
    old_pid, old_address = node.pid, node.address
    node.pause()
    assert node.alive
    assert process_state(old_pid or 0) == "T"  # pause() returns once the process is stopped
    node.resume()
    assert process_state(old_pid or 0) != "T"
    node.kill()
    assert not node.alive and not pid_running(old_pid or 0)
    with pytest.raises(ClusterError):
        cluster.wait_ready(1.5, storage_nodes=[1, 2])
    node.restart(timeout=30)
    assert node.alive and node.pid != old_pid
    assert node.address == old_address  # the same port: peers' address lists stay valid
    assert node.info["zero_copy_port"] == 40001
    assert "--zero-copy-port" in node.launched_args
    assert cluster.wait_ready(10) is not None
    state = json.loads((cluster.data_dir / "cluster.json").read_text())
    assert {p["name"]: p["pid"] for p in state["processes"]}["storage-1"] == node.pid


def test_restart_of_a_running_process_stops_it_first(cluster: LocalCluster) -> None:
    gateway = cluster.gateway(1)
    old_pid = gateway.pid
    gateway.restart(timeout=30)
    assert gateway.pid != old_pid and not pid_running(old_pid or 0)
    assert cluster.wait_ready(10) is not None


def test_stop_ends_every_pid_and_a_second_start_is_refused_while_running(
    cluster: LocalCluster,
) -> None:
    other = make_cluster(cluster.data_dir.parent, storage_nodes=1, metadata_nodes=1)
    with pytest.raises(ClusterError, match="already running"):
        other.start(timeout=10)
    pids = [p.pid for p in cluster.processes.values()]
    assert all(p.alive for p in cluster.processes.values())  # the refusal touched nothing
    LocalCluster.attach(cluster.data_dir).stop(grace=5)
    assert not any(pid_running(pid or 0) for pid in pids)
    assert not cluster.running


def test_sigkill_after_the_grace_period(tmp_path: Path) -> None:
    c = make_cluster(
        tmp_path, storage_nodes=0, metadata_nodes=1, gateways=0, env={"FAKE_IGNORE_SIGTERM": "1"}
    )
    c.start(timeout=30)
    pid = c.metadata(1).pid
    c.stop(grace=0.5)
    assert pid is not None and not pid_running(pid)


def test_a_process_that_fails_stops_the_rest_and_shows_its_log(tmp_path: Path) -> None:
    c = make_cluster(tmp_path, storage_nodes=2, metadata_nodes=1, env={"FAKE_FAIL_ROLE": "storage"})
    with pytest.raises(ProcessStartError, match="boom: configured to fail"):
        c.start(timeout=30)
    assert not c.running
    assert (c.data_dir / "logs" / "storage-1.log").exists()


def test_readiness_waits_for_a_controller(tmp_path: Path) -> None:
    c = make_cluster(tmp_path, storage_nodes=1, metadata_nodes=1, env={"FAKE_NO_CONTROLLER": "1"})
    with pytest.raises(ClusterError, match="controller -1"):
        c.start(timeout=4)  # waited out in full: the stand-ins are ready in about a second
    assert not c.running


def test_attach_without_state_file(tmp_path: Path) -> None:
    with pytest.raises(ClusterNotFoundError):
        LocalCluster.attach(tmp_path)


def test_bad_layouts_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        LocalCluster(tmp_path, metadata_nodes=0)
    with pytest.raises(ValueError, match="extra_config"):
        LocalCluster(tmp_path, extra_config={"broker": {}})


def test_real_etcd_starts_and_stops(tmp_path: Path) -> None:
    c = LocalCluster(
        tmp_path / "e",
        storage_nodes=0,
        metadata_nodes=1,
        gateways=0,
        service_modules=MODULES,
        env={"PYTHONPATH": str(FAKES)},
    )
    try:
        c.start(timeout=60)
        etcd = c.processes["etcd"]
        assert etcd.alive and c.etcd_url.startswith("http://127.0.0.1:")
        assert etcd.address == c.etcd_url
        assert os.path.isdir(c.data_dir / "data" / "etcd")
    finally:
        c.stop(grace=5)
    assert not c.processes["etcd"].alive
    # A second start asks for the same etcd ports again (its data knows that URL).
    again = LocalCluster(
        tmp_path / "e",
        storage_nodes=0,
        metadata_nodes=1,
        gateways=0,
        service_modules=MODULES,
        env={"PYTHONPATH": str(FAKES)},
    )
    try:
        again.start(timeout=60)
        assert again.etcd_url == c.etcd_url
    finally:
        again.stop(grace=5)
