"""A SparkSession for running Riverlog jobs on this machine: local mode with the settings
measured to start fastest and stay quiet on a small box (see shared/notes/pyspark.md), used by
the example pipeline, the benchmark and the tests.

Python workers must run the interpreter that has Riverlog installed, so PYSPARK_PYTHON is set
to this one unless already set. To run on a cluster instead, pass its master URL (`spark://...`,
`yarn`, `k8s://...`); the workers there need `pip install riverlog[spark]` too.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""

FAST_START_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def local_session(
    app_name: str = "riverlog",
    master: str = "local[2]",
    *,
    work_dir: Path | None = None,
    conf: dict[str, str] | None = None,
    fast_start: bool = True,
) -> Any:
    """Get or create a SparkSession on `master` with UI off, two shuffle partitions, UTC,
    loopback-only networking in local mode and log4j at ERROR. `fast_start` limits the JVM to
    its quick JIT tier and serial GC: sessions start seconds sooner, which suits tests and short
    jobs, but long jobs run slower (the benchmark turns it off)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    work = work_dir or Path(tempfile.mkdtemp(prefix="riverlog-spark-"))
    work.mkdir(parents=True, exist_ok=True)
    log4j = work / "log4j2.properties"
    log4j.write_text(QUIET_LOG4J2)
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": (
            f"{FAST_START_JVM if fast_start else ''} -Dlog4j2.configurationFile={log4j}".strip()
        ),
        "spark.local.dir": str(work),
    }
    if master.startswith("local"):
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        settings["spark.driver.host"] = "127.0.0.1"
    settings.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
