"""Fixtures of the gateway's unit tests (the fakes live in `gateway_fakes`)."""

import pytest
from gateway_fakes import FAST, Harness, make_image

from riverlog.common.clock import ManualClock


@pytest.fixture
def harness() -> Harness:
    """Topic t: partitions led by storage nodes 1, 2, 1; topic u: one partition on node 3."""
    return Harness(make_image(1, {"t": [1, 2, 1], "u": [3]}), FAST)


@pytest.fixture
def manual_harness() -> Harness:
    """The same cluster, with a ManualClock for the fetcher and the request deadlines, for
    tests that read exact waits (nothing here advances it, so no retry may wait on it)."""
    return Harness(make_image(1, {"t": [1, 2, 1], "u": [3]}), FAST, ManualClock())
