"""The Spark suite's fixtures: ONE SparkSession in local[2] for every Spark test (starting one
takes 8-20 s here), set up as measured in shared/notes/pyspark.md (no UI, two shuffle
partitions, a fast-starting JIT, loopback only, the venv's Python for workers, quiet logs; see
`riverlog.spark.session`). Helpers are in `spark_helpers.py`. The session does not call
`riverlog.spark.register`: PySpark finds the `riverlog` format through the installed
`pyspark_riverlog` module, which the tests rely on.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if here in item.path.resolve().parents and not item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime (java on PATH or JAVA_HOME): Spark cannot start")
    from riverlog.spark.session import local_session

    os.environ["PYSPARK_PYTHON"] = os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = local_session(
        "riverlog-tests", "local[2]", work_dir=tmp_path_factory.mktemp("spark-work")
    )
    try:
        yield session
    finally:
        session.stop()
