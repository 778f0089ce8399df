"""Fixtures of the tiered-storage unit tests: a partition log with remote.storage.enable and
small segments, filled on a manual clock (helpers: tiered_testkit.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "log"))

from storage_log_testkit import fill, open_log
from tiered_testkit import tiered

from riverlog.common.clock import ManualClock
from riverlog.services.storage.log import PartitionLog


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000_000)


@pytest.fixture
def plog(tmp_path: Path, clock: ManualClock) -> PartitionLog:
    log = open_log(tmp_path / "data", clock, tiered())
    fill(log, 20, clock=clock, value_size=40)  # ~100-byte batches, 300-byte segments
    assert log.segment_count > 4
    return log
