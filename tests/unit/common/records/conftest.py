"""Every test of this folder runs twice: with the C record loop (`_speedups`, when it was built)
and with the pure-Python one it falls back to, so both stay exactly alike (decision 0016)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from riverlog.common.records import record_loop


@pytest.fixture(scope="module", params=["c", "python"], autouse=True)
def which_record_loop(request: pytest.FixtureRequest) -> Iterator[str]:
    """Which record loop the reader uses (module scope: hypothesis tests may use it)."""
    saved = (record_loop._speedups, record_loop.decode_into)
    if request.param == "c":
        if not record_loop.compiled():
            pytest.skip("the _speedups C extension is not built here")
    else:
        record_loop._speedups = None
        record_loop.decode_into = record_loop.decode_into_py
    try:
        yield request.param
    finally:
        record_loop._speedups, record_loop.decode_into = saved
