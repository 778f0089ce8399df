"""Batch and streaming writes of the `riverlog` sink: each Spark task produces its rows with
the SDK's Producer.

The DataFrame has Spark's Kafka sink's columns: `value` (binary or string, required), and
optionally `key` (binary or string), `topic` (string; else the `topic` option), `partition`
(int; else the key's murmur2 hash or the sticky partitioner) and `headers`
(array<struct<key string, value binary>>). The columns are checked on the driver when the write
is planned, so a missing or mistyped column fails before any task starts. Tasks take Arrow
batches (Spark's Arrow writer interface: no per-row Spark objects), send every row, flush, and
fail if any record failed; their commit messages carry how many records and bytes they wrote,
which the driver logs. Delivery is at least once, as with Spark's Kafka sink: a retried task
sends its rows again; `riverlog.transactional` makes a stream exactly once (`txn_writer.py`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from riverlog.client import Producer, RecordFuture, RiverlogError

from .options import RiverlogOptionError, WriteOptions

log = logging.getLogger(__name__)

_KEY_OR_VALUE = (BinaryType, StringType)


@dataclass(frozen=True)
class WriteResult(WriterCommitMessage):
    """What one task wrote."""

    records: int
    bytes: int


def _check_column(schema: StructType, name: str, types: tuple[type[DataType], ...]) -> bool:
    """True if `schema` has column `name` of one of `types`; raises if it has another type."""
    fields = {f.name.lower(): f for f in schema.fields}
    field = fields.get(name)
    if field is None:
        return False
    if not isinstance(field.dataType, types):
        wanted = " or ".join(t.typeName() for t in types)
        raise RiverlogOptionError(
            f"column {name!r} must be {wanted} to be written to Riverlog, not "
            f"{field.dataType.simpleString()}"
        )
    return True


def check_schema(schema: StructType, options: WriteOptions) -> None:
    """Raise RiverlogOptionError unless `schema` can be written (see the module doc)."""
    if not _check_column(schema, "value", _KEY_OR_VALUE):
        raise RiverlogOptionError(
            "a DataFrame written to Riverlog needs a 'value' column (binary or string); it has "
            f"{schema.fieldNames()}"
        )
    _check_column(schema, "key", _KEY_OR_VALUE)
    _check_column(schema, "partition", (IntegerType,))
    if not _check_column(schema, "topic", (StringType,)) and options.topic is None:
        raise RiverlogOptionError(
            "no topic to write to: set the option 'topic' or add a 'topic' column"
        )
    if _check_column(schema, "headers", (ArrayType,)):
        element = next(f for f in schema.fields if f.name.lower() == "headers").dataType
        assert isinstance(element, ArrayType)
        inner = element.elementType
        ok = (
            isinstance(inner, StructType)
            and [f.name for f in inner.fields] == ["key", "value"]
            and isinstance(inner.fields[0].dataType, StringType)
            and isinstance(inner.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise RiverlogOptionError(
                "column 'headers' must be array<struct<key: string, value: binary>>, not "
                f"{element.simpleString()}"
            )


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    names = {n.lower(): i for i, n in enumerate(batch.schema.names)}
    index = names.get(name)
    if index is None:
        return None
    column = batch.column(index)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        if name in ("key", "value"):
            column = column.cast(pa.binary())
    return list(column.to_pylist())


def _first_error(futures: list[RecordFuture]) -> tuple[int, BaseException | None]:
    """Wait for `futures`; how many failed and the first error. Records of one produce batch
    share one outcome, so this is cheap next to sending them."""
    failed = 0
    first: BaseException | None = None
    for future in futures:
        error = future.exception()
        if error is not None:
            failed += 1
            first = first or error
    return failed, first


def produce_batches(options: WriteOptions, batches: Iterator[pa.RecordBatch]) -> WriteResult:
    """Send every row of `batches` with a producer of its own; raise if any record failed
    (runs in a Spark worker)."""
    with Producer(options.producer_config()) as producer:
        return produce_rows(producer, options, batches)


def produce_rows(
    producer: Producer, options: WriteOptions, batches: Iterator[pa.RecordBatch]
) -> WriteResult:
    """Send every row of `batches` with `producer` and flush; raise if any record failed.

    The futures of one Arrow batch are checked after the next one has been sent, so the check
    overlaps with sending instead of waiting for each batch's acknowledgements (a callback per
    record costs more than the send itself)."""
    sent = 0
    size = 0
    previous: list[RecordFuture] = []
    failed, first = 0, None
    send = producer.send
    for batch in batches:
        values = _column(batch, "value")
        assert values is not None  # checked on the driver
        n = len(values)
        keys = _column(batch, "key") or [None] * n
        topics = _column(batch, "topic") or [options.topic] * n
        partitions = _column(batch, "partition") or [None] * n
        headers = _column(batch, "headers")
        if headers is None:
            pairs: list[Any] = [None] * n
        else:
            pairs = [[(h["key"], h["value"]) for h in hs] if hs else None for hs in headers]
        if None in topics:
            raise RiverlogOptionError("a row has a null 'topic' and there is no 'topic' option")
        futures = list(map(send, topics, values, keys, pairs, partitions))
        failed, first = _first_error(previous)
        if failed:
            break
        previous = futures
        sent += n
        size += batch.nbytes
    producer.flush()
    if not failed:
        failed, first = _first_error(previous)
    if failed:
        message = first.message if isinstance(first, RiverlogError) else str(first)
        raise RiverlogError(f"{failed} record(s) could not be written to Riverlog: {message}")
    return WriteResult(sent, size)


def _log_commit(messages: Sequence[WriterCommitMessage | None], what: str) -> None:
    results = [m for m in messages if isinstance(m, WriteResult)]
    log.info(
        "riverlog: %s wrote %d records (%d bytes) from %d tasks",
        what,
        sum(r.records for r in results),
        sum(r.bytes for r in results),
        len(results),
    )


class RiverlogBatchWriter(DataSourceArrowWriter):
    """`df.write.format("riverlog").mode("append").save()`."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, "batch write")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_commit(messages, "aborted batch write (records already sent stay)")


class RiverlogStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("riverlog")`: at-least-once, like Spark's Kafka sink."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return produce_batches(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, f"micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_commit(messages, f"aborted micro-batch {batchId}")
