"""The producer's batch encoding (decision 0015): `encode_records` (whole columns at once, with
its fast path and its record-by-record fallback) gives the bytes `BatchBuilder` gives, a built
`ProducerBatch` drops its records and keeps only its bytes and the records' metadata, and a
restamped batch (the idempotent producer's rewrite) carries the new producer fields with a
valid CRC."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from riverlog.client.producer.batch import ProducerBatch, restamp
from riverlog.common.records import CompressionType, encode_columns
from riverlog.common.records.builder import BatchBuilder, encode_headers
from riverlog.common.records.encode_columns import encode_records
from riverlog.common.records.header import iter_batches, validate_batch
from riverlog.common.records.reader import iter_batches_records

Row = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]] | None]


def reference(rows: list[Row], codec: CompressionType = CompressionType.NONE) -> bytes:
    builder = BatchBuilder(codec)
    for timestamp, key, value, headers in rows:
        builder.append(timestamp, key, value, headers or ())
    return builder.build()


def columns(rows: list[Row]) -> bytes:
    return encode_records(
        [r[0] for r in rows],
        [r[1] for r in rows],
        [r[2] for r in rows],
        [encode_headers(r[3]) if r[3] else None for r in rows],
    )


def batch_of(rows: list[Row], codec: CompressionType = CompressionType.NONE) -> ProducerBatch:
    batch = ProducerBatch("t", 0, 0.0, compression=codec)
    for timestamp, key, value, headers in rows:
        assert batch.append((timestamp, key, value, encode_headers(headers) if headers else None))
    return batch


BASE = 1_700_000_000_000


@pytest.mark.parametrize(
    "rows",
    [
        [(BASE, None, b"v", None)],  # one record
        [(BASE + i // 10, None, b"x" * 100, None) for i in range(64)],  # offsets up to 63
        [(BASE + i // 10, None, b"x" * 100, None) for i in range(65)],  # and a 2-byte one
        [(BASE, None, b"x" * 8000, None), (BASE, None, b"y" * 9000, None)],  # past the tables
        [(BASE, b"key-%d" % i, b"v" * i, None) for i in range(200)],  # keys
        [(BASE, None if i % 2 else b"k", b"v", None) for i in range(10)],  # some keys null
        [(BASE, b"k", None, None), (BASE, b"k", b"v", None)],  # a tombstone
        [(BASE, None, b"v", [("h", b"1"), ("n", None)]), (BASE, None, b"w", None)],  # headers
        [(BASE + d, None, b"v", None) for d in (0, 63, 64, 8191, 8192, 100_000)],  # deltas
        [(BASE, None, b"v", None), (BASE - 5, None, b"w", None)],  # going back in time
        [(0, None, b"", None), (-1, None, b"", None)],  # timestamps 0 and -1
        [(-1, None, b"v", None)] * 3,
        [(BASE, None, b"v" * (i % 300), None) for i in range(9000)],  # past 8,191 records
    ],
)
def test_columns_encode_as_the_builder_does(rows: list[Row], encoder: str) -> None:
    assert columns(rows) == reference(rows)[61:]
    assert batch_of(rows).build() == reference(rows)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 200),
            st.one_of(st.none(), st.binary(max_size=80)),
            st.one_of(st.none(), st.binary(max_size=300)),
            st.booleans(),
        ),
        min_size=1,
        max_size=150,
    ),
    st.sampled_from([0, BASE]),
    st.booleans(),
)
def test_columns_encode_as_the_builder_does_for_any_records(
    raw: list[tuple[int, bytes | None, bytes | None, bool]], base: int, same_time: bool
) -> None:
    rows: list[Row] = [
        (base if same_time else base + delta, key, value, [("h", value)] if hdr else None)
        for delta, key, value, hdr in raw
    ]
    assert columns(rows) == reference(rows)[61:]


def test_a_compressed_batch_and_its_records() -> None:
    rows: list[Row] = [(BASE + i, b"k%d" % i, b"value %d" % i, None) for i in range(50)]
    built = batch_of(rows, CompressionType.ZSTD).build()
    validate_batch(built)
    assert [(r.key, r.value, r.timestamp) for r in iter_batches_records(built)] == [
        (k, v, t) for t, k, v, _ in rows
    ]


def test_a_built_batch_keeps_bytes_and_metadata_only() -> None:
    batch = batch_of([(BASE, None, b"abc", None), (BASE + 2, b"key", None, None)])
    data = batch.build()
    assert batch.records == [] and batch.data is data and batch.size == len(data)
    assert batch.build() is data  # built once
    batch.result.complete(40, -1, None)
    first, second = batch.result.metadata(0), batch.result.metadata(1)
    assert (first.offset, first.timestamp, first.serialized_key_size) == (40, BASE, -1)
    assert (first.serialized_value_size, second.offset, second.timestamp) == (3, 41, BASE + 2)
    assert (second.serialized_key_size, second.serialized_value_size) == (3, -1)


def test_restamp_changes_the_producer_fields_and_the_crc() -> None:
    batch = batch_of([(BASE, None, b"abc", None)] * 3)
    batch.producer_id, batch.producer_epoch, batch.base_sequence = 7, 0, 10
    first = batch.build()
    batch.producer_epoch, batch.base_sequence = 1, 0
    second = batch.build()
    header = iter_batches(second)[0]
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 1, 0)
    assert second == restamp(first, 7, 1, 0) and second[57:] == first[57:]
    validate_batch(second)  # the CRC matches


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.ZSTD])
def test_pieces_are_the_batch_unjoined_and_restamp_in_the_header(codec: CompressionType) -> None:
    """The sender puts a batch's (header, records) into its request unjoined: their
    concatenation is the batch `build` gives, before and after a restamp, and the records
    piece stays the same object (no copy)."""
    batch = batch_of([(BASE + i, None, b"value %d" % i, None) for i in range(20)], codec)
    batch.producer_id, batch.producer_epoch, batch.base_sequence = 7, 0, 10
    header, body = batch.pieces()
    assert len(header) == 61 and batch.size == len(header) + len(body)
    first = batch.build()
    assert first == header + body
    validate_batch(first)
    batch.producer_epoch, batch.base_sequence = 1, 0
    header2, body2 = batch.pieces()
    assert body2 is body and header2 != header
    second = batch.build()
    assert second == header2 + body2 == restamp(first, 7, 1, 0)
    validate_batch(second)  # the CRC over header and records matches


def test_batch_size_counts_an_upper_bound_per_record() -> None:
    batch = ProducerBatch("t", 0, 0.0, batch_size=1024)
    taken = 0
    while batch.append((BASE + taken, None, b"v" * 100, None)):
        taken += 1
    assert taken == 8 and len(batch.build()) <= 1024
    lone = ProducerBatch("t", 0, 0.0, batch_size=10)
    assert lone.append((BASE, None, b"x" * 100, None))  # the first record always goes in


# ---- the C loop (`_speedups.encode_columns`) against the Python paths -----------------------

_ts = st.integers(min_value=-1, max_value=(1 << 63) - 1)
_blob = st.none() | st.binary(max_size=300)


@pytest.fixture(params=["c", "python"])
def encoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test with the C loop and with the Python paths only."""
    if request.param == "c" and encode_columns.encode_c is None:
        pytest.skip("the C extension is not built")
    if request.param == "python":
        monkeypatch.setattr(encode_columns, "encode_c", None)
    return str(request.param)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_ts, _blob, _blob), min_size=1, max_size=40), st.data())
def test_the_c_loop_encodes_as_the_python_paths(
    rows: list[tuple[int, bytes | None, bytes | None]], data: st.DataObject
) -> None:
    if encode_columns.encode_c is None:
        pytest.skip("the C extension is not built")
    # timestamps near the first one as a producer makes them, or anywhere in int64
    if data.draw(st.booleans()):
        base = rows[0][0] % (1 << 40)
        rows = [(base + (t % 10_000), k, v) for t, k, v in rows]
    timestamps = [r[0] for r in rows]
    keys = [r[1] for r in rows]
    values = [r[2] for r in rows]
    headers: list[bytes | None] = [None] * len(rows)
    try:
        expected: bytes | None = encode_columns._encode_general(timestamps, keys, values, headers)
    except (ValueError, OverflowError):
        expected = None  # the Python path raises: the C loop must hand the batch back
    got = encode_columns.encode_c(timestamps, keys, values)
    if got is not None:
        assert got == expected
    else:
        # handed back: only where a delta is past int64 (the Python path decides)
        assert any(not -(1 << 63) <= t - timestamps[0] < (1 << 63) for t in timestamps)


def test_the_c_loop_hands_back_what_it_does_not_take() -> None:
    c = encode_columns.encode_c
    if c is None:
        pytest.skip("the C extension is not built")
    assert c([], [], []) is None
    assert c([1], [None], [bytearray(b"x")]) is None  # not bytes
    assert c([1], ["k"], [b"x"]) is None
    assert c([1, 2], [None], [b"x", b"y"]) is None  # lengths differ
    assert c((1,), [None], [b"x"]) is None  # not lists
    assert c([True], [None], [b"x"]) is None  # not an exact int
    assert c([-2], [None], [b"x"]) is None  # below -1: the Python path raises
    assert c([1 << 63], [None], [b"x"]) is None
    assert c([-1, (1 << 63) - 1], [None, None], [b"x", b"y"]) is None  # delta past int64


def test_encode_records_with_either_encoder(encoder: str) -> None:
    rows: list[Row] = [
        (1_700_000_000_000 + i % 3, None if i % 2 else b"k%d" % i, b"v" * i, None)
        for i in range(100)
    ]
    assert columns(rows) == reference(rows)[61:]
    rows[5] = (rows[5][0], rows[5][1], rows[5][2], [("h", b"x")])
    assert columns(rows) == reference(rows)[61:]
