"""The glibc malloc settings (decision 0044): applied once per process unless the environment
says otherwise."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from riverlog.common.malloc import OPT_OUT_ENV, wanted


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, True),
        ({OPT_OUT_ENV: "1"}, True),
        ({OPT_OUT_ENV: "0"}, False),
        ({OPT_OUT_ENV: "off"}, False),
        ({"MALLOC_MMAP_THRESHOLD_": "65536"}, False),
        ({"MALLOC_TRIM_THRESHOLD_": "0"}, False),
        ({"MALLOC_TOP_PAD_": "0"}, False),
    ],
)
def test_the_operators_environment_decides(environ: dict[str, str], expected: bool) -> None:
    assert wanted(environ) is expected


def _applied_in_child(extra_env: dict[str, str]) -> str:
    code = textwrap.dedent(
        """
        from riverlog.common.malloc import tune_malloc
        print(tune_malloc(), tune_malloc())
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop(OPT_OUT_ENV, None)
    env.update(extra_env)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_applied_once_in_a_fresh_process_and_not_when_opted_out() -> None:
    assert _applied_in_child({}) == "True True"
    assert _applied_in_child({OPT_OUT_ENV: "0"}) == "False False"
