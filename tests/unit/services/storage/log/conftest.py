"""Fixtures for the log-layer tests; the helpers themselves live in storage_log_testkit."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from storage_log_testkit import TS

from riverlog.common.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(TS)
