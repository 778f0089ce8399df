"""A real S3-compatible server for the tiered-storage tests: moto's server (`moto[server]`)
as its own process on a free loopback port, started and stopped (or killed) by PID, with a
bucket made through boto3 as any S3 user would, and optionally moto's request recorder, whose
replay gives a restarted server the state of the killed one."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from riverlog.cluster.readiness import free_port

HOST = "127.0.0.1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
REGION = "us-east-1"


@dataclass
class MotoServer:
    process: subprocess.Popen[bytes]
    port: int

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.port}"

    def store_settings(self, bucket: str, prefix: str = "") -> dict[str, str]:
        """The store's keys (without rsm.config.) for this server."""
        return {
            "s3.bucket": bucket,
            "s3.endpoint": self.endpoint,
            "s3.region": REGION,
            "s3.prefix": prefix,
            "s3.access.key.id": ACCESS_KEY,
            "s3.secret.access.key": SECRET_KEY,
            "s3.request.timeout.ms": "3000",
        }

    def create_bucket(self, bucket: str) -> None:
        import boto3  # moto[server]'s dependency: a plain S3 client to make the bucket

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )
        client.create_bucket(Bucket=bucket)

    def kill(self) -> None:
        """SIGKILL, by PID: the server and everything it held in memory are gone."""
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def replay_recording(self) -> None:
        """Replay what a recording server (`moto_server(recording=...)`) wrote to the
        recording file before it was killed: moto's own way to get its state back."""
        url = f"{self.endpoint}/moto-api/recorder/replay-recording"
        request = urllib.request.Request(url, method="POST", data=b"")
        with urllib.request.urlopen(request, timeout=120) as response:
            assert response.status == 200

    def pause(self) -> None:
        os.kill(self.process.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.process.pid, signal.SIGCONT)


def _accepting(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def moto_server(
    log_dir: Path, port: int | None = None, recording: Path | None = None
) -> Iterator[MotoServer]:
    """Run moto's S3 server until the block ends (then SIGTERM, SIGKILL after 10 s, by PID).
    `port` restarts a server on the port an earlier one had. `recording`: moto keeps nothing
    across a restart, but its recorder appends every request to this file, which a server
    started later replays (`MotoServer.replay_recording`); a line a kill cut short is dropped
    first."""
    port = port or free_port()
    log = (log_dir / f"moto-{port}.log").open("ab")
    env = dict(os.environ)
    if recording is not None:
        env |= {"MOTO_ENABLE_RECORDING": "true", "MOTO_RECORDER_FILEPATH": str(recording)}
        if recording.exists():
            data = recording.read_bytes()
            recording.write_bytes(data[: data.rfind(b"\n") + 1])
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while not _accepting(port):
            if process.poll() is not None:
                raise RuntimeError(f"moto server exited with {process.returncode}; see {log.name}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"moto server not listening on {port} after 60 s")
            time.sleep(0.1)
        yield MotoServer(process, port)
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
