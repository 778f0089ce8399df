"""Property tests: whatever records go in come back out, through every codec, as Records, as
columns and as (offset, timestamp) pairs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from riverlog.common.records import (
    BatchBuilder,
    CompressionType,
    Header,
    Record,
    decode_columns,
    iter_batches_records,
    iter_record_timestamps,
    validate_batch,
)

MAX_TS = 1 << 62  # any timestamp from here down to -1 keeps every delta within int64

blobs = st.one_of(st.none(), st.binary(max_size=300), st.binary(min_size=8190, max_size=8200))
headers = st.lists(st.tuples(st.text(max_size=20), st.one_of(st.none(), st.binary(max_size=40))))
records = st.lists(
    st.tuples(st.integers(min_value=-1, max_value=MAX_TS), blobs, blobs, headers),
    min_size=1,
    max_size=40,
)
small = st.one_of(st.none(), st.binary(max_size=30))
Recs = list[tuple[int, bytes | None, bytes | None, list[Header]]]
small_records: st.SearchStrategy[Recs] = st.lists(
    st.tuples(st.integers(min_value=-1, max_value=MAX_TS), small, small, st.just([])),
    min_size=1,
    max_size=30,
)


def build(recs: list[tuple[int, bytes | None, bytes | None, list[Header]]], codec: int) -> bytes:
    builder = BatchBuilder(CompressionType(codec))
    for rec in recs:
        assert builder.append(*rec)
    return builder.build()


@settings(max_examples=150, deadline=None)
@given(recs=records, codec=st.sampled_from(list(CompressionType)))
def test_round_trip(
    recs: list[tuple[int, bytes | None, bytes | None, list[Header]]], codec: CompressionType
) -> None:
    data = build(recs, codec)
    header = validate_batch(data)
    assert header.records_count == len(recs)
    assert header.base_timestamp == recs[0][0]
    assert header.max_timestamp == max(r[0] for r in recs)
    expected = [Record(i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(recs)]
    assert list(iter_batches_records(data)) == expected
    columns = decode_columns(data)
    assert columns.offsets == list(range(len(recs)))
    assert columns.timestamps == [r[0] for r in recs]
    assert columns.keys == [r[1] for r in recs]
    assert columns.values == [r[2] for r in recs]
    assert columns.headers == [r[3] for r in recs]
    assert columns.next_offset == len(recs)
    assert list(iter_record_timestamps(data)) == [(i, r[0]) for i, r in enumerate(recs)]


@settings(max_examples=50, deadline=None)
@given(
    batches=st.lists(small_records, min_size=1, max_size=4),
    min_offset=st.integers(min_value=0, max_value=200),
)
def test_concatenated_batches_with_min_offset(
    batches: list[list[tuple[int, bytes | None, bytes | None, list[Header]]]], min_offset: int
) -> None:
    data = b""
    expected: list[Record] = []
    offset = 0
    for recs in batches:
        batch = bytearray(build(recs, CompressionType.NONE))
        batch[0:8] = offset.to_bytes(8, "big")  # the leader's base offset (outside the CRC)
        data += batch
        expected += [Record(offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(recs)]
        offset += len(recs)
    wanted = [r for r in expected if r.offset >= min_offset]
    assert list(iter_batches_records(data, min_offset)) == wanted
    assert decode_columns(data, min_offset).next_offset == max(offset, min_offset)
