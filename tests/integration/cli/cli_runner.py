"""Running the real `riverlog` command in a subprocess for the CLI integration tests, with an
environment of its own: RIVERLOG_HOME set (never the developer's ~/.riverlog) and
RIVERLOG_BOOTSTRAP when a gateway is given; nothing else of the caller's RIVERLOG_* leaks in."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

Riverlog = Callable[..., subprocess.CompletedProcess[str]]
COMMAND_TIMEOUT_S = 120.0


def cli_env(home: Path, bootstrap: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIVERLOG_")}
    env["RIVERLOG_HOME"] = str(home)
    if bootstrap is not None:
        env["RIVERLOG_BOOTSTRAP"] = bootstrap
    return env


def run_riverlog(
    args: tuple[str, ...],
    env: Mapping[str, str],
    input: str | bytes | None = None,
    timeout: float = COMMAND_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    data = input.encode() if isinstance(input, str) else input
    done = subprocess.run(
        [sys.executable, "-m", "riverlog.cli.main", *args],
        input=data if data is not None else b"",
        capture_output=True,
        env=dict(env),
        timeout=timeout,
    )
    return subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
    )


def assert_one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    """Failed with status 1 and exactly one `riverlog: error:` line naming the cause."""
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("riverlog: error: "), done.stderr
    for needle in needles:
        assert needle in lines[0], done.stderr
