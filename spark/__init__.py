"""Riverlog for PySpark: the `riverlog` Python data source, with the options and schema of
Spark's Kafka source, for batch and streaming reads and writes.

    import riverlog.spark
    riverlog.spark.register(spark)        # not needed where PySpark auto-discovers sources
    df = (spark.read.format("riverlog")
          .option("riverlog.bootstrap", "127.0.0.1:9092")
          .option("subscribe", "page-views")
          .load())

Installing Riverlog also installs the top-level module `pyspark_riverlog`, which PySpark 4
finds by its name and registers with no call.
"""

from __future__ import annotations

from typing import Any

from .offsets import DataLossError, OffsetRange
from .options import RiverlogOptionError
from .source import SHORT_NAME, RiverlogDataSource
from .writer import WriteResult

__all__ = [
    "SHORT_NAME",
    "DataLossError",
    "OffsetRange",
    "RiverlogDataSource",
    "RiverlogOptionError",
    "WriteResult",
    "register",
]


def register(spark: Any) -> None:
    """Register the `riverlog` format with this SparkSession."""
    spark.dataSource.register(RiverlogDataSource)
