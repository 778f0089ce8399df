"""ProduceRecords in C: a serialized `ProduceRecordsRequest` straight into RecordBatch v2 bodies
by partition, and the answer's per-record results straight into their protobuf encoding
(decision 0045).

The gateway's plain-record path otherwise makes a Record per request record (from its
protobuf message), encodes each partition's records from those, and builds one `RecordResult`
message per record for the answer: about 2.5 µs per record of Python work, which held a plain
client at a third of the rate the SDK reaches. These functions do the same work over the bytes
with no Python object per record. They live in the optional C extension (`_speedups`); without
it `compiled()` is False and the gateway takes its Python path (the protobuf request), which
the unit tests compare byte for byte with this one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import record_loop

Batch = tuple[bytes, int, int, int]
"""One batch's encoded records (no header), their count, base and max timestamp."""

Group = tuple[int, list[Batch], int]
"""A partition, its batches, and how many records it got."""


def _c() -> Any:
    """The C extension as `record_loop` holds it now (None without it; the tests swap it)."""
    return vars(record_loop)["_speedups"]


def compiled() -> bool:
    """True when the C extension, with these functions, is in use."""
    return hasattr(_c(), "produce_batches")


def request_fields(data: bytes) -> tuple[str, int | None, int, int, str, int]:
    """(topic, partition or None, acks, timeout_ms, compression_type, record count) of a
    serialized ProduceRecordsRequest, with protobuf's checks; ValueError when it is malformed."""
    return _c().produce_request(data)  # type: ignore[no-any-return]


def request_batches(
    data: bytes,
    partition: int | None,
    partitions: int,
    sticky: Callable[[], int],
    now_ms: int,
    batch_size: int,
) -> tuple[list[Group], bytes, list[tuple[int, int]]]:
    """The request's records by partition (`partition`; else murmur2 of the key over
    `partitions`; else `sticky()`, called at most once), encoded as the gateway's Python path
    encodes them (a timestamp of 0 becomes `now_ms`; a new batch past `batch_size`): the groups
    by partition, each record's group (native int32s, -1 for a negative timestamp), and the
    (index, timestamp) of each record with a negative timestamp. ValueError: malformed."""
    return _c().produce_batches(  # type: ignore[no-any-return]
        data, -1 if partition is None else partition, partitions, sticky, now_ms, batch_size
    )


def results_wire(
    assign: bytes,
    partitions: list[int],
    offsets: list[int],
    codes: list[int],
    messages: list[str],
    bad_code: int,
    bad_messages: list[str],
) -> bytes:
    """ProduceRecordsResponse's `results` (field 1), encoded, one per record in request order:
    group g's records get (partitions[g], offsets[g] + their place, or -1 when codes[g] is set
    or offsets[g] is negative, codes[g], messages[g]); records of group -1 get (-1, -1,
    bad_code, the next of `bad_messages`)."""
    return _c().produce_results(  # type: ignore[no-any-return]
        assign, partitions, offsets, codes, messages, bad_code, bad_messages
    )
