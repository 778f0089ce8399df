"""Batch and streaming readers of the `riverlog` source: planning on the driver, reading in
the workers.

Both plan on the driver with an AdminClient (see `offsets.py`) and read in the workers with a
`RangeReader` per task (see `fetch.py`); `read()` depends only on its OffsetRange and the parsed
options, as Spark requires (it runs on a reader object of its own, in another process).

The streaming reader keeps Spark's Kafka source's contract: its offset is
`{"topic": {"partition": next offset}}`, stored by Spark in the checkpoint, so a restarted query
resumes where the last committed micro-batch ended; `latestOffset` is one ListOffsets for all
partitions (topics are looked up again at most every `DISCOVERY_INTERVAL_S`, which is how new
partitions and, for a pattern, new topics join); `maxOffsetsPerTrigger` caps each micro-batch,
under `trigger(availableNow=True)` too, where the target is fixed when the query starts.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from riverlog.client import AdminClient
from riverlog.common.types import TopicPartition

from .fetch import RangeReader
from .offsets import (
    DataLossError,
    OffsetRange,
    Offsets,
    check_ranges,
    data_loss_message,
    discover,
    list_offsets,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    resolve,
    split_ranges,
)
from .options import EARLIEST, LATEST, ReadOptions

DISCOVERY_INTERVAL_S = 5.0


def read_range(options: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Every record of one OffsetRange, as Arrow batches (runs in a Spark Python worker)."""
    assert isinstance(partition, OffsetRange), partition
    reader = RangeReader(options.consumer_config(), options.fail_on_data_loss)
    try:
        yield from reader.read(partition)
    finally:
        reader.close()


def _admin(options: ReadOptions) -> AdminClient:
    return AdminClient({"bootstrap.servers": options.bootstrap, "client.id": "riverlog-spark"})


class RiverlogBatchReader(DataSourceReader):
    """`spark.read.format("riverlog")`: one task per partition's [startingOffsets,
    endingOffsets) (more with minPartitions), planned once, when Spark asks for partitions."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        with _admin(options) as admin:
            tps = discover(admin, options.selection)
            committed = options.read_committed
            start = resolve(admin, options.starting, tps, EARLIEST, "startingOffsets", committed)
            end = resolve(admin, options.ending, tps, LATEST, "endingOffsets", committed)
            earliest = list_offsets(admin, dict.fromkeys(tps, EARLIEST))
        for tp in tps:
            if start[tp] > end[tp]:
                raise ValueError(
                    f"{tp}: the starting offset {start[tp]} is after the ending offset {end[tp]}"
                )
        ranges = check_ranges(start, end, earliest, options.fail_on_data_loss)
        planned = split_ranges(ranges, options.min_partitions)
        return planned or [OffsetRange("", -1, 0, 0)]  # Spark needs at least one partition

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition)


class RiverlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("riverlog")`. The offset methods run in one long-lived driver
    process per query, so the AdminClient and the partition list are cached (and dropped when
    the reader is pickled)."""

    def __init__(self, options: ReadOptions) -> None:
        self._setup(options)

    def _setup(self, options: ReadOptions) -> None:
        self.options = options
        self._admin: AdminClient | None = None
        self._partitions: list[TopicPartition] = []
        self._discovered_at = -DISCOVERY_INTERVAL_S
        self._target: Offsets | None = None  # availableNow: the offsets to stop at

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["options"])

    def _client(self) -> AdminClient:
        if self._admin is None:
            self._admin = _admin(self.options)
        return self._admin

    def _tps(self, force: bool = False) -> list[TopicPartition]:
        now = time.monotonic()
        if force or now - self._discovered_at >= DISCOVERY_INTERVAL_S:
            self._partitions = discover(self._client(), self.options.selection)
            self._discovered_at = now
        return self._partitions

    def initialOffset(self) -> dict[str, Any]:
        options = self.options
        tps = self._tps(force=True)
        start = resolve(
            self._client(), options.starting, tps, LATEST, "startingOffsets", options.read_committed
        )
        return offsets_to_json(start)

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._tps(force=True)
        self._target = self._latest_of(tps)

    def _latest(self) -> Offsets:
        if self._target is not None:
            return dict(self._target)
        return self._latest_of(self._tps())

    def _latest_of(self, tps: list[TopicPartition]) -> Offsets:
        """Where the readable data ends: the high watermarks, or the last stable offsets under
        read_committed."""
        return list_offsets(self._client(), dict.fromkeys(tps, LATEST), self.options.read_committed)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = offsets_from_json(start)
        latest = self._latest()
        new = [tp for tp in latest if tp not in begin]
        if new:  # partitions that appeared since `start`: read them from their beginning
            begin.update(list_offsets(self._client(), dict.fromkeys(new, EARLIEST)))
        for tp, offset in begin.items():  # never move backwards (nor drop a partition)
            latest[tp] = max(latest.get(tp, offset), offset)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, limit.max_rows)
        return offsets_to_json(latest)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in stop if tp not in begin]
        if new:  # only for an `end` planned before a partition appeared in `start`
            begin.update(list_offsets(self._client(), dict.fromkeys(new, EARLIEST)))
        lost = [tp for tp in begin if tp not in stop]
        if lost and self.options.fail_on_data_loss:
            names = ", ".join(str(tp) for tp in sorted(lost))
            raise DataLossError(data_loss_message(f"partitions {names} are gone"))
        earliest = list_offsets(self._client(), dict.fromkeys(stop, EARLIEST))
        ranges = check_ranges(begin, stop, earliest, self.options.fail_on_data_loss)
        return split_ranges(ranges, self.options.min_partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.options, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: Riverlog keeps the records, the checkpoint keeps the position."""

    def stop(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None
