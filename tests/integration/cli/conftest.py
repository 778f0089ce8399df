"""Run the real `riverlog` command (`python -m riverlog.cli.main`, in a subprocess) against the
session cluster: `riverlog(*args, input=...)` returns the finished process with text output.
RIVERLOG_BOOTSTRAP points at the session gateway and RIVERLOG_HOME at an empty directory, so a
developer's own ~/.riverlog is never touched."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_runner import COMMAND_TIMEOUT_S, Riverlog, assert_one_line_error, cli_env, run_riverlog

from riverlog.cluster import LocalCluster


@pytest.fixture(scope="session")
def cli_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("riverlog-home")


@pytest.fixture
def riverlog(cluster: LocalCluster, cli_home: Path) -> Riverlog:
    """`riverlog(*args, input=None, timeout=120, bootstrap=<session gateway>)`."""

    def run(
        *args: str,
        input: str | bytes | None = None,
        timeout: float = COMMAND_TIMEOUT_S,
        bootstrap: str | None = cluster.gateway_address,
    ) -> subprocess.CompletedProcess[str]:
        return run_riverlog(args, cli_env(cli_home, bootstrap), input, timeout)

    return run


@pytest.fixture
def expect_error() -> Callable[..., None]:
    """`expect_error(done, *needles)`: see assert_one_line_error."""
    return assert_one_line_error
