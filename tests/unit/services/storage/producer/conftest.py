"""Fixtures for the producer-state tests."""

from __future__ import annotations

import pytest

from riverlog.common.clock import ManualClock


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()
