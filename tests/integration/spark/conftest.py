"""The Spark suite: every test here is marked `spark`. Its SparkSession is the `spark` fixture
of tests/integration/conftest.py (one for the whole test session, shared with the Spark test of
replication/test_follower_fetch_racks.py). Helpers are in `spark_helpers.py`.
"""

from __future__ import annotations

from pathlib import Path

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in item.path.resolve().parents and not item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.spark)
