"""Reading fetch responses: several batches, min_offset, torn tails, control batches,
LogAppendTime, the columnar form and the per-batch timestamps for ListOffsets."""

from __future__ import annotations

import pytest

from riverlog.common.records import (
    LOG_APPEND_TIME,
    BatchBuilder,
    CompressionType,
    Record,
    decode_columns,
    iter_batches_records,
    iter_record_timestamps,
    next_fetch_offset,
)
from riverlog.common.records.header import set_base_offset

TS = 1_700_000_000_000


def batch_at(
    base_offset: int, n: int, codec: CompressionType = CompressionType.NONE, **kw: object
) -> bytes:
    builder = BatchBuilder(codec, **kw)  # type: ignore[arg-type]
    for i in range(n):
        builder.append(TS + base_offset + i, b"k%d" % (base_offset + i), b"v%d" % (base_offset + i))
    data = bytearray(builder.build())
    set_base_offset(data, 0, base_offset)  # as the leader does, outside the CRC
    return bytes(data)


def fetch_response() -> bytes:
    """Offsets 10-14 (none), 15-17 (lz4), 18-21 (zstd): what a fetch from 10 returns."""
    return (
        batch_at(10, 5)
        + batch_at(15, 3, CompressionType.LZ4)
        + batch_at(18, 4, CompressionType.ZSTD)
    )


def test_records_of_several_batches_carry_absolute_offsets() -> None:
    records = list(iter_batches_records(fetch_response()))
    assert [r.offset for r in records] == list(range(10, 22))
    assert [r.key for r in records] == [b"k%d" % o for o in range(10, 22)]
    assert [r.timestamp for r in records] == [TS + o for o in range(10, 22)]


def test_min_offset_skips_earlier_records_and_whole_batches() -> None:
    data = fetch_response()
    assert [r.offset for r in iter_batches_records(data, 12)] == list(range(12, 22))
    assert [r.offset for r in iter_batches_records(data, 19)] == [19, 20, 21]
    assert list(iter_batches_records(data, 22)) == []


def test_incomplete_trailing_batch_is_ignored() -> None:
    data = fetch_response()
    last = batch_at(22, 2)
    for cut in (1, 11, 12, 30, 61, len(last) - 1):
        records = list(iter_batches_records(data + last[:cut]))
        assert [r.offset for r in records] == list(range(10, 22)), cut
        assert decode_columns(data + last[:cut]).next_offset == 22


def test_empty_input_has_no_records() -> None:
    assert list(iter_batches_records(b"")) == []
    assert decode_columns(b"", 40).next_offset == 40


def test_next_offset_follows_the_last_complete_batch() -> None:
    data = fetch_response()
    assert next_fetch_offset(data, 10) == 22
    assert next_fetch_offset(data + batch_at(22, 3)[:40], 10) == 22
    assert next_fetch_offset(b"", 7) == 7
    assert next_fetch_offset(data, 30) == 30  # never moves a position back
    assert decode_columns(data, 16).next_offset == 22


def test_control_batches_are_skipped_but_advance_the_position() -> None:
    marker = batch_at(22, 1, is_control=True, is_transactional=True, producer_id=5)
    data = fetch_response() + marker
    assert [r.offset for r in iter_batches_records(data)][-1] == 21
    columns = decode_columns(data)
    assert len(columns) == 12 and columns.next_offset == 23
    with_control = list(iter_batches_records(data, include_control=True))
    assert with_control[-1].offset == 22


def test_log_append_time_gives_every_record_the_max_timestamp() -> None:
    builder = BatchBuilder(timestamp_type=LOG_APPEND_TIME)
    for ts in (TS + 9, TS, TS + 3):
        builder.append(ts, None, b"v")
    data = builder.build()
    records = list(iter_batches_records(data))
    assert [r.timestamp for r in records] == [TS + 9] * 3
    assert [r.timestamp_type for r in records] == [LOG_APPEND_TIME] * 3
    columns = decode_columns(batch_at(0, 2) + data)
    assert columns.timestamps == [TS, TS + 1, TS + 9, TS + 9, TS + 9]
    assert columns.timestamp_types == [0, 0, 1, 1, 1]
    assert list(iter_record_timestamps(data)) == [(0, TS + 9), (1, TS + 9), (2, TS + 9)]


def test_columns_are_parallel_lists() -> None:
    columns = decode_columns(fetch_response(), 13)
    assert len(columns) == 9
    assert columns.offsets == list(range(13, 22))
    assert columns.timestamps == [TS + o for o in range(13, 22)]
    assert columns.keys == [b"k%d" % o for o in range(13, 22)]
    assert columns.values == [b"v%d" % o for o in range(13, 22)]
    assert columns.headers == [[] for _ in range(9)]
    assert columns.timestamp_types == [0] * 9


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.config_name)
def test_record_timestamps_of_one_batch(codec: CompressionType) -> None:
    builder = BatchBuilder(codec)
    stamps = [TS + 50, TS + 10, TS + 70, TS + 70, TS - 3]
    for ts in stamps:
        builder.append(ts, None, b"v")
    data = bytearray(builder.build())
    set_base_offset(data, 0, 1000)
    assert list(iter_record_timestamps(bytes(data))) == list(enumerate(stamps, start=1000))
    # A batch inside a larger buffer (a segment read), bytes after it ignored.
    buffer = b"\x00" * 9 + bytes(data) + b"\xff" * 20
    assert list(iter_record_timestamps(buffer, 9)) == list(enumerate(stamps, start=1000))


def test_readers_accept_bytearray_and_memoryview() -> None:
    data = fetch_response()
    expected = list(iter_batches_records(data))
    assert list(iter_batches_records(bytearray(data))) == expected
    assert list(iter_batches_records(memoryview(data))) == expected
    assert all(type(r.key) is bytes for r in iter_batches_records(memoryview(data)))


def test_records_are_records() -> None:
    (record,) = iter_batches_records(batch_at(0, 1))
    assert isinstance(record, Record)
    assert record == Record(0, TS, b"k0", b"v0", [], 0)
    assert record._asdict()["value"] == b"v0"
