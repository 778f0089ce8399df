"""Planning on the driver: which partitions a read covers, where each starts and ends, and how
the ranges become Spark tasks.

Everything here runs in the driver's Python process and talks to the cluster only through the
SDK's AdminClient: one DescribeTopics (or ListTopics for a pattern) to find partitions, and one
ListOffsets for all partitions at once to turn `earliest`/`latest`/timestamps into offsets. A
range is `[start, end)` of one partition; a task reads exactly its range, so a retried task
re-reads the same records. Offsets travel as Spark's streaming offset in the JSON shape of
Spark's Kafka source, `{"topic": {"0": 42}}` (string keys, as JSON requires).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from riverlog.client import AdminClient, RiverlogError
from riverlog.common.types import TopicPartition

from .options import EARLIEST, LATEST, OffsetSpec, RiverlogOptionError, TopicSelection

Offsets = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Records a query needs are gone (deleted by retention or DeleteRecords) and
    failOnDataLoss is true."""


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """One task's work: the records of `topic`-`partition` with offsets in [start, end)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return max(self.end - self.start, 0)


def data_loss_message(what: str) -> str:
    return (
        f"{what}. Some data may have been lost because they are not available in Riverlog any "
        "more: the records were deleted by retention or DeleteRecords before they were read. "
        "If you want the query to carry on from the earliest available records, set the "
        "option failOnDataLoss to false."
    )


def offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def offsets_from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {
        TopicPartition(topic, int(p)): int(offset)
        for topic, partitions in data.items()
        for p, offset in partitions.items()
    }


def discover(admin: AdminClient, selection: TopicSelection) -> list[TopicPartition]:
    """The partitions `selection` covers now. Unknown subscribed or assigned topics, and
    assigned partitions that do not exist, raise RiverlogOptionError."""
    if selection.pattern is not None:
        regex = re.compile(selection.pattern)
        names = [t for t in admin.list_topics() if regex.fullmatch(t)]
        if not names:
            return []
    else:
        names = sorted(set(selection.subscribe) | {t for t, _ in selection.assign})
    try:
        described = admin.describe_topics(names)
    except RiverlogError as e:
        raise RiverlogOptionError(f"{selection.describe()}: {e.message}") from None
    missing = [n for n in names if n not in described]
    if missing and selection.pattern is None:
        raise RiverlogOptionError(f"{selection.describe()}: unknown topic(s) {missing}")
    if selection.assign:
        tps = [TopicPartition(t, p) for t, p in selection.assign]
        for tp in tps:
            if tp.partition >= len(described[tp.topic].partitions):
                count = len(described[tp.topic].partitions)
                raise RiverlogOptionError(
                    f"{selection.describe()}: {tp} does not exist ({tp.topic} has {count} "
                    "partitions)"
                )
        return tps
    return [
        TopicPartition(name, p.partition)
        for name, topic in sorted(described.items())
        for p in topic.partitions
    ]


def list_offsets(
    admin: AdminClient, queries: Mapping[TopicPartition, int], read_committed: bool = False
) -> Offsets:
    """One ListOffsets for every partition: -2 earliest, -1 latest, else a timestamp (ms); a
    timestamp after every record resolves to the latest offset. `read_committed`: latest is
    the last stable offset (a read_committed reader never plans past an open transaction)."""
    if not queries:
        return {}
    found = admin.list_offsets(queries, read_committed=read_committed)
    out: Offsets = {}
    latest = [tp for tp, result in found.items() if result is None]
    if latest:
        ends = admin.list_offsets(dict.fromkeys(latest, LATEST), read_committed=read_committed)
        for tp, result in ends.items():
            if result is None:
                raise RiverlogError(f"{tp}: the gateway returned no latest offset")
            out[tp] = result.offset
    for tp, result in found.items():
        if result is not None:
            out[tp] = result.offset
    return out


def spec_queries(
    spec: OffsetSpec, tps: Iterable[TopicPartition], default: int, name: str
) -> dict[TopicPartition, int]:
    """ListOffsets queries for `spec` over `tps`. Partitions absent from a per-partition spec
    take `default` (-2 or -1); a per-partition spec naming a partition not read is an error."""
    tps = list(tps)
    if spec.kind == "earliest":
        return dict.fromkeys(tps, EARLIEST)
    if spec.kind == "latest":
        return dict.fromkeys(tps, LATEST)
    if spec.kind == "timestamp":
        return dict.fromkeys(tps, spec.timestamp)
    given = {TopicPartition(t, p): v for (t, p), v in spec.per_partition.items()}
    extra = sorted(set(given) - set(tps))
    if extra:
        raise RiverlogOptionError(
            f"option {name!r} names partitions the query does not read: "
            + ", ".join(str(tp) for tp in extra)
        )
    if spec.kind == "timestamps":
        return {tp: given.get(tp, default) for tp in tps}
    return {tp: given.get(tp, default) for tp in tps}


def resolve(
    admin: AdminClient,
    spec: OffsetSpec,
    tps: list[TopicPartition],
    default: int,
    name: str,
    read_committed: bool = False,
) -> Offsets:
    """Concrete offsets for `spec`: explicit offsets are kept, the rest looked up in one call."""
    queries = spec_queries(spec, tps, default, name)
    explicit = {tp: v for tp, v in queries.items() if v >= 0 and spec.kind == "offsets"}
    lookups = {tp: v for tp, v in queries.items() if tp not in explicit}
    return {**explicit, **list_offsets(admin, lookups, read_committed)}


def check_ranges(
    start: Offsets, end: Offsets, earliest: Offsets, fail_on_data_loss: bool
) -> list[OffsetRange]:
    """Ranges [start, end) per partition, with the records already deleted (start below the
    log start offset) reported as data loss, or skipped when failOnDataLoss is false."""
    ranges: list[OffsetRange] = []
    for tp in sorted(end):
        begin = start.get(tp, earliest.get(tp, 0))
        stop = end[tp]
        low = earliest.get(tp, 0)
        if begin < low:
            if fail_on_data_loss:
                raise DataLossError(
                    data_loss_message(
                        f"{tp}: offsets {begin}..{low - 1} were requested but the log now starts "
                        f"at {low}"
                    )
                )
            begin = low
        if stop < begin:
            if fail_on_data_loss and start.get(tp) is not None:
                raise DataLossError(
                    data_loss_message(f"{tp}: the end offset {stop} is below the start {begin}")
                )
            continue
        if stop > begin:
            ranges.append(OffsetRange(tp.topic, tp.partition, begin, stop))
    return ranges


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Split ranges so there are at least `min_partitions` tasks, each range into pieces in
    proportion to its size (Spark's Kafka source's KafkaOffsetRangeCalculator)."""
    total = sum(r.size for r in ranges)
    if not min_partitions or min_partitions <= len(ranges) or total == 0:
        return ranges
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(1, math.ceil(r.size * min_partitions / total))
        step = r.size / parts
        bounds = [r.start + round(step * i) for i in range(parts)] + [r.end]
        out += [
            OffsetRange(r.topic, r.partition, lo, hi)
            for lo, hi in itertools.pairwise(bounds)
            if hi > lo
        ]
    return out


def rate_limit(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """End offsets that read at most about `max_rows` records in all, shared among partitions
    in proportion to what each has available (Spark's Kafka source's rateLimit)."""
    available = {tp: max(latest[tp] - start.get(tp, latest[tp]), 0) for tp in latest}
    total = sum(available.values())
    if total <= max_rows:
        return dict(latest)
    out: Offsets = {}
    for tp, end in latest.items():
        begin = start.get(tp, end)
        share = max_rows * available[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        out[tp] = min(begin + step, end)
    return out
