"""Service processes freeze what start-up made (decision 0019, 2026-11-28 addendum) unless
`RIVERLOG_GC_FREEZE=0`. Each case runs in its own interpreter: freezing is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from riverlog.common.gctune import OPT_OUT_ENV

_PROBE = textwrap.dedent(
    """
    import gc
    from riverlog.common.gctune import freeze_startup_objects
    kept = [[i] for i in range(1000)]
    done = freeze_startup_objects()
    print(done, gc.get_freeze_count() >= len(kept))
    """
)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "True True"), ("1", "True True"), ("0", "False False"), ("off", "False False")],
)
def test_freezes_unless_opted_out(value: str | None, expected: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != OPT_OUT_ENV}
    if value is not None:
        env[OPT_OUT_ENV] = value
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == expected
