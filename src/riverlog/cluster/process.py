"""One local service process, controlled by PID: start it, wait for its ready file (or health
URL), signal it (kill, pause, resume), restart it with the same arguments, stop it gracefully.

A `ManagedProcess` is either *owned* (this Python process spawned it and holds its `Popen`, so
exits are reaped) or *attached* (rebuilt from the cluster state file by another process, e.g.
`riverlog cluster down`). Signals always go to the recorded PID, never to a name; for attached
processes the PID is first checked against the recorded command line (`/proc/PID/cmdline`) so a
recycled PID is never signalled.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ClusterError, ProcessStartError
from .readiness import etcd_healthy, etcd_tls_files


@dataclass(frozen=True, slots=True)
class ProcessSpec:
    """What to run: the full argv, where it logs, and how it announces readiness (a ready file
    written by the service, or for etcd a health URL). `wrapper` is an argv prefix the command
    runs under (e.g. `ip netns exec NS`); it execs the command, so the PID stays the service's
    and `/proc/PID/cmdline` shows `args`."""

    name: str
    role: str
    node_id: int | None
    args: tuple[str, ...]
    log_path: Path
    ready_file: Path | None = None
    health_url: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    wrapper: tuple[str, ...] = ()


def process_state(pid: int) -> str | None:
    """The state letter of `pid` in /proc (R, S, T, Z, ...); None without procfs or process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]


def pid_running(pid: int) -> bool:
    """True when `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    state = process_state(pid)
    return state != "Z"  # None: no procfs (macOS), existence is all we can tell


def wait_state(pid: int, stopped: bool, timeout: float = 5.0) -> bool:
    """Wait until `pid` is (or is no longer) in the stopped state: a signal is delivered
    asynchronously, so SIGSTOP's effect is not visible the moment kill() returns. True once
    it is; also True without procfs, where nothing can be observed."""
    deadline = time.monotonic() + timeout
    while True:
        state = process_state(pid)
        if state is None or (state == "T") == stopped:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)


def pid_matches(pid: int, args: tuple[str, ...]) -> bool:
    """True when the running `pid` still is the process started with `args` (argv[0] may
    differ: etcd's launcher script execs the real binary)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists() and pid_running(pid)
    except OSError:
        return False
    if not raw:
        # An exiting process has released its memory, so its cmdline reads empty, but it is
        # not gone until it is a zombie: still ours, or stop() would return before it ended.
        return pid_running(pid)
    argv = [part.decode(errors="replace") for part in raw.split(b"\0")[:-1]]
    return argv[1:] == list(args[1:])


class ManagedProcess:
    """A service process of a local cluster.

    Lifecycle: start() → any of kill()/pause()/resume()/restart() → stop(). Not thread-safe:
    drive one ManagedProcess from one thread. `on_change` is called after every start so the
    owning cluster can rewrite its state file.
    """

    def __init__(
        self,
        spec: ProcessSpec,
        *,
        pid: int | None = None,
        info: dict[str, Any] | None = None,
        launched_args: tuple[str, ...] | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.spec = spec
        self.pid = pid
        self.info: dict[str, Any] = dict(info or {})
        self.launched_args = launched_args or spec.args
        self.on_change = on_change
        self._popen: subprocess.Popen[bytes] | None = None

    def __repr__(self) -> str:
        return f"ManagedProcess({self.name}, pid={self.pid}, address={self.address})"

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def role(self) -> str:
        return self.spec.role

    @property
    def node_id(self) -> int | None:
        return self.spec.node_id

    @property
    def log_path(self) -> Path:
        return self.spec.log_path

    @property
    def address(self) -> str | None:
        """`host:port` of its gRPC server (etcd: its client URL), once ready."""
        value = self.info.get("address")
        return str(value) if value is not None else None

    @property
    def metrics_address(self) -> str | None:
        """`host:port` of its Prometheus `/metrics` endpoint, once ready (None: it serves
        none; decision 0033)."""
        value = self.info.get("metrics_address")
        return str(value) if value is not None else None

    @property
    def metrics_url(self) -> str | None:
        """`http://host:port/metrics`, or https:// when the process serves it over TLS (its
        ready file's `metrics_scheme`)."""
        address = self.metrics_address
        scheme = str(self.info.get("metrics_scheme") or "http")
        return f"{scheme}://{address}/metrics" if address is not None else None

    @property
    def alive(self) -> bool:
        """Running (a paused process counts as alive)."""
        if self.pid is None:
            return False
        if self._popen is not None:
            return self._popen.poll() is None
        return pid_running(self.pid) and pid_matches(self.pid, self.launched_args)

    @property
    def returncode(self) -> int | None:
        """Exit status when this process spawned it and it has exited."""
        return self._popen.poll() if self._popen is not None else None

    def start(self, timeout: float = 60.0) -> None:
        """Spawn and wait until ready; raises ProcessStartError (with the log's tail)."""
        self.spawn()
        self.wait_ready(timeout)

    def spawn(self, args: tuple[str, ...] | None = None) -> None:
        """Launch without waiting, in its own session, output appended to its log file."""
        if self.alive:
            raise ClusterError(f"{self.name} is already running (pid {self.pid})")
        self.launched_args = args or self.spec.args
        if self.spec.ready_file is not None:
            self.spec.ready_file.unlink(missing_ok=True)
        self.spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.info = {}
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.spec.env}
        with open(self.spec.log_path, "ab") as log:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            argv = (*self.spec.wrapper, *self.launched_args)
            log.write(f"==== {stamp} starting: {' '.join(argv)}\n".encode())
            log.flush()
            self._popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        self.pid = self._popen.pid

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Block until the ready file appears (or the health URL answers)."""
        deadline = time.monotonic() + timeout
        delay = 0.02
        while True:
            if not self.alive:
                code = self.returncode
                raise ProcessStartError(
                    f"{self.name} exited (status {code}) before it was ready; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if self._check_ready():
                if self.on_change is not None:
                    self.on_change()
                return
            if time.monotonic() >= deadline:
                raise ProcessStartError(
                    f"{self.name} (pid {self.pid}) not ready after {timeout:.0f}s; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.2)

    def _check_ready(self) -> bool:
        if self.spec.ready_file is not None:
            try:
                data = json.loads(self.spec.ready_file.read_text(encoding="utf-8"))
            except (FileNotFoundError, json.JSONDecodeError):
                return False
            if not isinstance(data, dict) or "address" not in data:
                return False
            self.info = data
            return True
        tls = etcd_tls_files(self.launched_args)
        if self.spec.health_url is not None and etcd_healthy(self.spec.health_url, tls=tls):
            self.info = {"pid": self.pid, "address": self.spec.health_url.rsplit("/", 1)[0]}
            return True
        return False

    def send_signal(self, sig: int) -> bool:
        """Signal the PID if it is still this process; False when it is gone."""
        if self.pid is None or not self.alive:
            return False
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def kill(self, sig: int = signal.SIGKILL, wait: float = 10.0) -> None:
        """Send `sig` (default SIGKILL). For SIGKILL, also wait (bounded) until it is gone."""
        if sig == signal.SIGKILL:
            self.send_signal(signal.SIGCONT)
        if self.send_signal(sig) and sig == signal.SIGKILL and not self.wait_exit(wait):
            raise ClusterError(f"{self.name} (pid {self.pid}) survived SIGKILL for {wait}s")

    def pause(self) -> None:
        """SIGSTOP: the process stays alive but does nothing (a hung node)."""
        if not self.send_signal(signal.SIGSTOP):
            raise ClusterError(f"{self.name} is not running")
        if self.pid is not None and not wait_state(self.pid, stopped=True):
            raise ClusterError(f"{self.name} did not stop after SIGSTOP")

    def resume(self) -> None:
        """SIGCONT after pause()."""
        if not self.send_signal(signal.SIGCONT):
            raise ClusterError(f"{self.name} is not running")
        if self.pid is not None and not wait_state(self.pid, stopped=False):
            raise ClusterError(f"{self.name} did not continue after SIGCONT")

    def wait_exit(self, timeout: float) -> bool:
        """Wait until the process has exited; False if it still runs after `timeout`."""
        if self._popen is not None:
            try:
                self._popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        deadline = time.monotonic() + timeout
        while self.alive:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def begin_stop(self) -> None:
        """SIGCONT (a paused process cannot handle SIGTERM), then SIGTERM; returns at once."""
        self.send_signal(signal.SIGCONT)
        self.send_signal(signal.SIGTERM)

    def finish_stop(self, grace: float) -> None:
        """After begin_stop(): wait up to `grace`, then SIGKILL and wait for the exit."""
        if not self.wait_exit(grace):
            self.kill(signal.SIGKILL)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `grace` seconds; no-op when not running."""
        self.begin_stop()
        self.finish_stop(grace)

    def restart(self, timeout: float = 60.0, *, same_port: bool = True) -> None:
        """Stop if running, then start with the same arguments and node id and wait for a new
        ready file. With `same_port` the ports it bound before are asked for again, so the
        address other processes were given stays valid."""
        if self.alive:
            self.stop()
        args = self.spec.args
        if same_port and self.info:
            args = pinned_ports(args, self.info)
        self.spawn(args)
        self.wait_ready(timeout)

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.spec.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])


def pinned_ports(args: tuple[str, ...], info: dict[str, Any]) -> tuple[str, ...]:
    """`args` with `--port 0` / `--zero-copy-port 0` / `--direct-port 0` replaced by the ports
    from a ready file."""
    ports: dict[str, int] = {}
    address = info.get("address")
    if isinstance(address, str) and ":" in address:
        ports["--port"] = int(address.rpartition(":")[2])
    zero_copy = info.get("zero_copy_port")
    if zero_copy is None and isinstance(info.get("zero_copy_address"), str):
        zero_copy = str(info["zero_copy_address"]).rpartition(":")[2]
    if zero_copy is not None and int(zero_copy) > 0:
        ports["--zero-copy-port"] = int(zero_copy)
    direct = info.get("direct_port")
    if direct is not None and int(direct) > 0:
        ports["--direct-port"] = int(direct)
    out = list(args)
    for i, arg in enumerate(out[:-1]):
        if arg in ports and out[i + 1] == "0":
            out[i + 1] = str(ports[arg])
    return tuple(out)
