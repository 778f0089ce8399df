"""Bootstrap resolution of the `riverlog` command: --bootstrap, then RIVERLOG_BOOTSTRAP, then
the local cluster's state file in RIVERLOG_HOME (default ~/.riverlog)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from riverlog.cli.connection import (
    default_data_dir,
    key_value,
    local_cluster_tls,
    parse_servers,
    resolve_bootstrap,
)
from riverlog.cli.console import CliError


def write_state(data_dir: Path, gateways: list[tuple[str, int | None, list[str]]]) -> None:
    """A cluster.json whose gateways are (address, pid, argv) triples."""
    data_dir.mkdir(parents=True, exist_ok=True)
    processes = [
        {
            "name": f"gateway-{i}",
            "role": "gateway",
            "node_id": i,
            "pid": pid,
            "address": address,
            "args": argv,
            "launched_args": argv,
            "log_path": str(data_dir / f"gateway-{i}.log"),
            "ready_file": None,
            "health_url": None,
            "info": {"address": address},
        }
        for i, (address, pid, argv) in enumerate(gateways, 1)
    ]
    document = {
        "version": 1,
        "data_dir": str(data_dir),
        "etcd_url": "http://127.0.0.1:2379",
        "external_etcd": True,
        "storage_nodes": 0,
        "metadata_nodes": 1,
        "gateways": len(gateways),
        "extra_config": {},
        "racks": None,
        "processes": processes,
    }
    (data_dir / "cluster.json").write_text(json.dumps(document))


@pytest.fixture
def sleeper():
    """A live process to stand for a gateway (its argv is what the state file records)."""
    argv = [sys.executable, "-c", "import time; time.sleep(60)", "gateway-stand-in"]
    proc = subprocess.Popen(argv)
    try:
        yield proc.pid, argv
    finally:
        proc.kill()
        proc.wait()


def test_explicit_bootstrap_wins(tmp_path: Path) -> None:
    env = {"RIVERLOG_BOOTSTRAP": "10.0.0.1:1", "RIVERLOG_HOME": str(tmp_path)}
    assert resolve_bootstrap("127.0.0.1:9092", env) == "127.0.0.1:9092"


def test_environment_before_the_local_cluster(tmp_path: Path) -> None:
    env = {"RIVERLOG_BOOTSTRAP": " 127.0.0.1:1, 127.0.0.1:2 ", "RIVERLOG_HOME": str(tmp_path)}
    assert resolve_bootstrap(None, env) == "127.0.0.1:1,127.0.0.1:2"


def test_local_cluster_gateways_from_the_state_file(tmp_path: Path, sleeper) -> None:
    pid, argv = sleeper
    write_state(tmp_path, [("127.0.0.1:7001", pid, argv)])
    assert resolve_bootstrap(None, {"RIVERLOG_HOME": str(tmp_path)}) == "127.0.0.1:7001"


def test_dead_gateways_are_not_offered(tmp_path: Path, sleeper) -> None:
    pid, argv = sleeper
    dead = [sys.executable, "-c", "pass", "gone"]
    write_state(tmp_path, [("127.0.0.1:7001", 999_999_999, dead), ("127.0.0.1:7002", pid, argv)])
    assert resolve_bootstrap(None, {"RIVERLOG_HOME": str(tmp_path)}) == "127.0.0.1:7002"


def test_a_recycled_pid_is_not_taken_for_the_gateway(tmp_path: Path) -> None:
    # Our own PID is alive, but its command line is not the recorded one.
    write_state(tmp_path, [("127.0.0.1:7001", os.getpid(), ["python", "-m", "something.else"])])
    with pytest.raises(CliError, match="no gateway running"):
        resolve_bootstrap(None, {"RIVERLOG_HOME": str(tmp_path)})


def test_nothing_known_says_how_to_fix_it(tmp_path: Path) -> None:
    with pytest.raises(CliError, match="--bootstrap HOST:PORT") as info:
        resolve_bootstrap(None, {"RIVERLOG_HOME": str(tmp_path / "none")})
    assert "RIVERLOG_BOOTSTRAP" in info.value.message
    assert "riverlog cluster up" in info.value.message


def test_default_data_dir(tmp_path: Path) -> None:
    assert default_data_dir({"RIVERLOG_HOME": str(tmp_path)}) == tmp_path
    assert default_data_dir({}) == Path.home() / ".riverlog"


@pytest.mark.parametrize("bad", ["", "localhost", "host:", ":9092", "h:0", "h:70000", "h:x"])
def test_bad_addresses_are_usage_errors(bad: str) -> None:
    with pytest.raises(CliError) as info:
        parse_servers(bad)
    assert info.value.exit_code == 2


def test_key_value() -> None:
    assert key_value("retention.ms=1000") == ("retention.ms", "1000")
    assert key_value(" cleanup.policy = compact ") == ("cleanup.policy", "compact")
    assert key_value("a=b=c") == ("a", "b=c")
    for bad in ("novalue", "=x"):
        with pytest.raises(argparse.ArgumentTypeError):
            key_value(bad)


def test_a_tls_local_cluster_gives_commands_its_ca(tmp_path: Path) -> None:
    write_state(tmp_path, [])
    home = {"RIVERLOG_HOME": str(tmp_path)}
    assert local_cluster_tls(None, home) == {}  # a plaintext cluster
    document = json.loads((tmp_path / "cluster.json").read_text())
    (tmp_path / "cluster.json").write_text(json.dumps({**document, "tls": True}))
    ca = str(tmp_path.resolve() / "tls" / "ca.pem")
    assert local_cluster_tls(None, home) == {"security.protocol": "SSL", "ssl.ca.location": ca}
    # An address given by hand, or no local cluster at all: nothing is assumed.
    assert local_cluster_tls("127.0.0.1:9092", home) == {}
    assert local_cluster_tls(None, {**home, "RIVERLOG_BOOTSTRAP": "127.0.0.1:1"}) == {}
    assert local_cluster_tls(None, {"RIVERLOG_HOME": str(tmp_path / "none")}) == {}


def test_cluster_up_takes_tls() -> None:
    from riverlog.cli.main import build_parser

    args = build_parser().parse_args(["cluster", "up", "--tls"])
    assert args.tls is True
    assert build_parser().parse_args(["cluster", "up"]).tls is False
