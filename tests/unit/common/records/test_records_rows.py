"""`decode_rows` (the consumer's record tuples straight from the bytes) against `decode_columns`,
and the C record loop against the pure-Python one on the same random batches: same records,
same timestamps (log append time included), same cut at `min_offset`, and the same errors for
damaged records. Runs under both loops (see conftest.py)."""

from __future__ import annotations

import gc
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_records_corruption import RECORD_DAMAGE, reframe

from riverlog.common.records import (
    LOG_APPEND_TIME,
    BatchBuilder,
    CompressionType,
    Header,
    InvalidBatchError,
    decode_columns,
    record_loop,
)
from riverlog.common.records.header import set_base_offset
from riverlog.common.records.reader import decode_rows, next_fetch_offset

TS = 1_700_000_000_000


class Row(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: list[Header]


blobs = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=8)), max_size=3)
records = st.lists(
    st.tuples(st.integers(-100_000, 100_000), blobs, blobs, headers), min_size=1, max_size=40
)
batches = st.lists(
    st.tuples(
        records,
        st.sampled_from(list(CompressionType)),
        st.booleans(),  # log append time
        st.booleans(),  # control batch
    ),
    min_size=1,
    max_size=4,
)


def build(spec: list[Any]) -> bytes:
    out = bytearray()
    base = 5
    for recs, codec, log_append, control in spec:
        builder = BatchBuilder(
            codec, timestamp_type=LOG_APPEND_TIME if log_append else 0, is_control=control
        )
        for delta, key, value, hdrs in recs:
            builder.append(TS + delta, key, value, hdrs)
        batch = bytearray(builder.build())
        set_base_offset(batch, 0, base)
        out += batch
        base += len(recs) + 3  # holes between batches, as compaction leaves
    return bytes(out)


def rows_of(columns: Any) -> list[Row]:
    return [
        Row("t", 3, *fields)
        for fields in zip(
            columns.offsets,
            columns.timestamps,
            columns.timestamp_types,
            columns.keys,
            columns.values,
            columns.headers,
            strict=True,
        )
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=batches, cut=st.integers(0, 120), torn=st.integers(0, 30))
def test_rows_match_columns(spec: list[Any], cut: int, torn: int) -> None:
    data = build(spec)
    data = data[: len(data) - torn]  # a torn trailing batch is ignored
    rows = decode_rows(data, cut, Row, "t", 3)
    assert rows == rows_of(decode_columns(data, cut))
    assert all(type(r) is Row for r in rows)
    assert all(r.offset >= cut for r in rows)
    # a bytearray (the direct fetch's answer buffer) is read in place, with the same result,
    # and its records come out as bytes
    held = bytearray(b"\x00" * 7 + data)
    assert decode_rows(held, cut, Row, "t", 3, start=7) == rows
    assert all(
        type(r.value) in (bytes, type(None)) for r in decode_rows(held, cut, Row, "t", 3, start=7)
    )
    assert next_fetch_offset(held, cut, 7) == next_fetch_offset(data, cut)


@settings(max_examples=60, deadline=None)
@given(spec=batches, cut=st.integers(0, 120))
def test_c_and_python_loops_agree(spec: list[Any], cut: int) -> None:
    data = build(spec)
    got = decode_columns(data, cut, include_control=True)
    saved = (record_loop._speedups, record_loop.decode_into)
    record_loop._speedups, record_loop.decode_into = None, record_loop.decode_into_py
    try:
        want = decode_columns(data, cut, include_control=True)
    finally:
        record_loop._speedups, record_loop.decode_into = saved
    assert got == want


def test_headers_are_fresh_lists() -> None:
    builder = BatchBuilder()
    for i in range(3):
        builder.append(TS, None, b"v%d" % i)
    rows = decode_rows(builder.build(), 0, Row, "t", 0)
    assert [r.headers for r in rows] == [[], [], []]
    rows[0].headers.append(("k", None))
    assert rows[1].headers == []


def test_rows_without_headers_are_left_out_of_the_cycle_collector(which_record_loop: str) -> None:
    """The C loop untracks rows of records without headers (and their empty lists), so a
    consumer's records do not make the collector run over them; rows with headers stay
    tracked, and every list is still an ordinary list of its own."""
    builder = BatchBuilder()
    builder.append(TS, None, b"plain")
    builder.append(TS, None, b"tagged", [("k", b"v")])
    plain, tagged = decode_rows(builder.build(), 0, Row, "t", 0)
    assert gc.is_tracked(tagged) and gc.is_tracked(tagged.headers)
    untracked = which_record_loop == "c"
    assert gc.is_tracked(plain) is not untracked
    assert gc.is_tracked(plain.headers) is not untracked
    plain.headers.append(("k", None))
    assert plain.headers == [("k", None)] and type(plain.headers) is list
    gc.collect()  # nothing reachable is lost
    assert plain.value == b"plain" and plain.headers == [("k", None)]


@pytest.mark.timeout(10)
@pytest.mark.parametrize(("records", "count", "message"), RECORD_DAMAGE.values(), ids=RECORD_DAMAGE)
def test_rows_refuse_damaged_records(records: bytes, count: int, message: str) -> None:
    with pytest.raises(InvalidBatchError, match=message):
        decode_rows(reframe(records, count), 0, Row, "t", 0)


@settings(max_examples=200, deadline=None)
@given(garbage=st.binary(max_size=80), count=st.integers(0, 5))
def test_garbage_records_raise_only_invalid_batch(garbage: bytes, count: int) -> None:
    batch = reframe(garbage, count)
    try:
        rows = decode_rows(batch, 0, Row, "t", 0)
    except InvalidBatchError:
        return
    assert len(rows) == count


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=batches, cut=st.integers(0, 120), torn=st.integers(0, 30), before=st.binary(max_size=9))
def test_a_range_of_a_larger_buffer_reads_as_its_slice(
    spec: list[Any], cut: int, torn: int, before: bytes
) -> None:
    """A fetch answer's records are decoded where they lie in the received message: the range
    [start, end) reads exactly as the bytes cut out would, and a batch torn at `end` is ignored
    though the bytes after `end` (here, the rest of it) are in the buffer."""
    whole = build(spec)
    records = whole[: len(whole) - torn]
    buffer = before + whole + b"\xff" * 7
    start, end = len(before), len(before) + len(records)
    rows = decode_rows(buffer, cut, Row, "t", 3, start=start, end=end)
    assert rows == decode_rows(records, cut, Row, "t", 3)
    ranged = decode_columns(buffer, cut, start=start, end=end)
    assert ranged == decode_columns(records, cut)
    assert next_fetch_offset(buffer, cut, start, end) == next_fetch_offset(records, cut)


def test_a_bad_range_is_refused() -> None:
    data = build([([(0, None, b"v", [])], CompressionType.NONE, False, False)])
    with pytest.raises(ValueError, match="bad range"):
        decode_rows(data, 0, Row, "t", 0, start=2, end=len(data) + 1)
    with pytest.raises(ValueError, match="bad range"):
        next_fetch_offset(data, 0, 5, 4)
