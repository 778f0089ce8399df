"""Helpers for metadata integration tests: real metadata processes
(`python -m riverlog.services.metadata`) on free loopback ports, each cluster under its own etcd
key prefix, stopped by PID; plus `run` and a bounded `wait_until`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from etcd_fixture import EtcdServer, free_port, stop_pid

REPO = Path(__file__).resolve().parents[3]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def wait_until(predicate: Callable[[], Any], timeout_s: float = 30.0, what: str = "") -> Any:
    """Poll `predicate` until truthy (returning its value) or fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:
            last_exc = exc
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what or predicate} (last error: {last_exc})")


async def until(predicate: Callable[[], Any], timeout_s: float = 30.0, what: str = "") -> None:
    """`wait_until` on the event loop: what `predicate` reads is changed by tasks of the same
    loop (a MembershipSession's heartbeats), so it polls with asyncio.sleep. For a state that
    is not in the cluster image (a watcher's `wait_for` would only look again when the image
    changes, or when its timeout runs out)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await asyncio.sleep(0.05)


class MetadataProcess:
    """One metadata instance process. start() waits for its ready file."""

    def __init__(
        self, instance_id: int, etcd: str, prefix: str, workdir: Path, configs: dict[str, str]
    ) -> None:
        self.instance_id = instance_id
        self.etcd = etcd
        self.prefix = prefix
        self.workdir = workdir
        self.configs = configs
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_file = workdir / f"metadata-{instance_id}.ready"
        self.log_path = workdir / f"metadata-{instance_id}.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout_s: float = 30.0) -> MetadataProcess:
        self.ready_file.unlink(missing_ok=True)
        args = [
            sys.executable,
            "-m",
            "riverlog.services.metadata",
            "--instance-id",
            str(self.instance_id),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--etcd",
            self.etcd,
            "--ready-file",
            str(self.ready_file),
            "--config",
            f"metadata.etcd.prefix={self.prefix}",
        ]
        for key, value in self.configs.items():
            args += ["--config", f"{key}={value}"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"metadata {self.instance_id} exited:\n{self.log()}")
            if self.ready_file.exists():
                info = json.loads(self.ready_file.read_text())
                assert info["address"] == self.address
                return self
            time.sleep(0.05)
        raise RuntimeError(f"metadata {self.instance_id} not ready:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None:
            stop_pid(self.proc)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class MetadataCluster:
    """N metadata instances sharing one etcd under a prefix of their own."""

    def __init__(self, etcd: EtcdServer, workdir: Path) -> None:
        self.etcd = etcd
        self.workdir = workdir
        self.prefix = f"/rl-{uuid.uuid4().hex[:10]}/"
        self.instances: dict[int, MetadataProcess] = {}

    def start(self, count: int = 3, configs: dict[str, str] | None = None) -> MetadataCluster:
        for i in range(count):
            self.add(i, configs)
        return self

    def add(self, instance_id: int, configs: dict[str, str] | None = None) -> MetadataProcess:
        proc = MetadataProcess(
            instance_id, self.etcd.endpoint, self.prefix, self.workdir, dict(configs or {})
        )
        self.instances[instance_id] = proc
        return proc.start()

    @property
    def addresses(self) -> list[str]:
        return [p.address for p in self.instances.values() if p.alive]

    def stop(self) -> None:
        for proc in self.instances.values():
            proc.stop()
