"""PySpark's hook for the `riverlog` data source: PySpark 4 imports every installed top-level
module named `pyspark_<something>` and registers its `DefaultSource` under
`DefaultSource.name()`, so `spark.read.format("riverlog")` works with no registration call.
The source itself lives in `riverlog.spark`."""

from riverlog.spark.source import RiverlogDataSource as DefaultSource

__all__ = ["DefaultSource"]
