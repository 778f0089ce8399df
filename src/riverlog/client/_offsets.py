"""ListOffsets for the consumer and the admin client: the earliest, latest or first-at-a-time
offset of partitions, retried on retriable errors until a deadline.

Kafka's special timestamps map to the proto's OffsetSpec: -2 earliest, -1 latest, -3 the record
with the largest timestamp; any other value looks up the first record with a timestamp at or
after it. Partitions that fail for good raise their RiverlogError naming the partition.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import NamedTuple

from riverlog.common.errors import ErrorCode, RiverlogError, error_for
from riverlog.common.types import TopicPartition
from riverlog.v1 import common_pb2, data_pb2

from ._connection import GatewayConnection
from .errors import ClientTimeoutError

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4  # tiered storage: the first offset on the leader's disk

_SPECS = {
    EARLIEST_TIMESTAMP: common_pb2.OFFSET_SPEC_EARLIEST,
    LATEST_TIMESTAMP: common_pb2.OFFSET_SPEC_LATEST,
    MAX_TIMESTAMP: common_pb2.OFFSET_SPEC_MAX_TIMESTAMP,
    EARLIEST_LOCAL_TIMESTAMP: common_pb2.OFFSET_SPEC_EARLIEST_LOCAL,
}


class OffsetAndTimestamp(NamedTuple):
    """A partition's offset for a timestamp query, and the timestamp of that record (-1 when
    the query was earliest/latest)."""

    offset: int
    timestamp: int


def list_offsets(
    conn: GatewayConnection,
    queries: Mapping[TopicPartition, int],
    *,
    timeout_s: float,
    request_timeout_s: float,
    backoff_s: float,
    read_committed: bool = False,
) -> dict[TopicPartition, OffsetAndTimestamp | None]:
    """Look up `queries` ({tp: timestamp or -1/-2/-3}). None where no record has a timestamp
    at or after the one asked. Retries retriable failures until `timeout_s` has passed (one
    attempt at least, however small `timeout_s`), then raises ClientTimeoutError."""
    results, failed = lookup_offsets(
        conn,
        queries,
        timeout_s=timeout_s,
        request_timeout_s=request_timeout_s,
        backoff_s=backoff_s,
        read_committed=read_committed,
    )
    if failed:
        names = ", ".join(str(tp) for tp in sorted(failed))
        last = next((e for e in reversed(failed.values()) if e is not None), None)
        raise ClientTimeoutError(
            f"offsets of {names} not found within {round(timeout_s * 1000)} ms"
            + (f" (last error: {last})" if last else "")
        )
    return results


def lookup_offsets(
    conn: GatewayConnection,
    queries: Mapping[TopicPartition, int],
    *,
    timeout_s: float,
    request_timeout_s: float,
    backoff_s: float,
    read_committed: bool = False,
) -> tuple[
    dict[TopicPartition, OffsetAndTimestamp | None], dict[TopicPartition, RiverlogError | None]
]:
    """`list_offsets` per partition: (the offsets found, the partitions still failing with a
    retriable error when `timeout_s` ran out, with that error or None if none was answered).
    The consumer's offset reset
    uses it so a partition that cannot be looked up yet (a topic not created yet) does not
    hold back the others. A non-retriable error is raised, naming its partition."""
    results: dict[TopicPartition, OffsetAndTimestamp | None] = {}
    pending = dict(queries)
    errors: dict[TopicPartition, RiverlogError] = {}
    deadline = time.monotonic() + timeout_s
    isolation = common_pb2.READ_COMMITTED if read_committed else common_pb2.READ_UNCOMMITTED
    while pending:
        request = data_pb2.ListOffsetsRequest(
            isolation_level=isolation,
            partitions=[
                data_pb2.ListOffsetsPartition(
                    topic=tp.topic,
                    partition=tp.partition,
                    spec=_SPECS.get(ts, common_pb2.OFFSET_SPEC_TIMESTAMP),
                    timestamp_ms=max(ts, 0),
                )
                for tp, ts in pending.items()
            ],
        )
        try:
            response = conn.call(lambda s: s.ListOffsets, request, request_timeout_s)
        except RiverlogError as e:
            if not e.retriable:
                raise
            errors.update(dict.fromkeys(pending, e))
        else:
            for answer in response.partitions:
                tp = TopicPartition(answer.topic, answer.partition)
                if tp not in pending:
                    continue
                if answer.error_code == ErrorCode.NONE:
                    del pending[tp]
                    errors.pop(tp, None)
                    results[tp] = (
                        None
                        if answer.offset < 0
                        else OffsetAndTimestamp(answer.offset, answer.timestamp_ms)
                    )
                    continue
                error = error_for(answer.error_code, answer.error_message)
                named = RiverlogError(f"{tp}: {error.message}", error.code)
                if not error.retriable:
                    raise named
                errors[tp] = named
        if not pending:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(backoff_s, remaining))
    return results, {tp: errors.get(tp) for tp in pending}
