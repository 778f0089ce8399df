"""The `riverlog` data source: the class Spark instantiates for `format("riverlog")`, which
parses its options once and hands out the readers and writers.

Spark creates a DataSource per query plan with the user's options and pickles it (with the
readers and writers it returns) into its Python workers, so everything kept here is plain
frozen data (see `options.py`). Bad options raise RiverlogOptionError when Spark first asks for
a reader or writer, i.e. on the driver before any task runs.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from .fetch import SPARK_SCHEMA
from .options import RiverlogOptionError, parse_read_options, parse_write_options
from .reader import RiverlogBatchReader, RiverlogStreamReader
from .txn_writer import RiverlogTransactionalStreamWriter
from .writer import RiverlogBatchWriter, RiverlogStreamWriter, check_schema

SHORT_NAME = "riverlog"


class RiverlogDataSource(DataSource):
    """Reads and writes Riverlog topics with the options and schema of Spark's Kafka source:

        spark.read.format("riverlog").option("riverlog.bootstrap", "127.0.0.1:9092")
             .option("subscribe", "events").load()

    Schema: key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int, headers array<struct<key string, value binary>>.
    """

    @classmethod
    def name(cls) -> str:
        return SHORT_NAME

    def schema(self) -> str:
        return SPARK_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return RiverlogBatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return RiverlogStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        options = parse_write_options(self.options)
        check_schema(schema, options)
        if options.transactional:
            raise RiverlogOptionError(
                "riverlog.transactional is for streaming writes (writeStream): a batch write has "
                "no micro-batch id to make a retry idempotent"
            )
        return RiverlogBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        options = parse_write_options(self.options)
        check_schema(schema, options)
        if options.transactional:
            return RiverlogTransactionalStreamWriter(options)
        return RiverlogStreamWriter(options)
