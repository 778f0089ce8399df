"""BatchBuilder: the header it writes, batch.size accounting, and what it refuses."""

from __future__ import annotations

import pytest

from riverlog.common.records import (
    HEADER_SIZE,
    LOG_APPEND_TIME,
    BatchBuilder,
    CompressionType,
    Header,
    Record,
    iter_batches_records,
    validate_batch,
)

TS = 1_700_000_000_000


def test_header_fields_of_a_plain_producer_batch() -> None:
    builder = BatchBuilder()
    for i, ts in enumerate([TS + 5, TS, TS + 20, TS + 3]):
        assert builder.append(ts, b"k%d" % i, b"v")
    data = builder.build()
    header = validate_batch(data)  # magic, length and CRC check
    assert header.base_offset == 0
    assert header.size == len(data)
    assert header.partition_leader_epoch == -1  # Java's NO_PARTITION_LEADER_EPOCH
    assert header.attributes == 0
    assert header.records_count == 4
    assert header.last_offset_delta == 3
    assert header.base_timestamp == TS + 5  # the first record's, as Kafka
    assert header.max_timestamp == TS + 20
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert [r.timestamp for r in iter_batches_records(data)] == [TS + 5, TS, TS + 20, TS + 3]


def test_producer_state_and_attribute_bits() -> None:
    builder = BatchBuilder(CompressionType.ZSTD, is_control=True, timestamp_type=LOG_APPEND_TIME)
    builder.producer_id, builder.producer_epoch, builder.base_sequence = 77, 3, 1000
    builder.is_transactional = True
    builder.append(TS, None, b"marker")
    header = validate_batch(builder.build())
    assert header.compression == CompressionType.ZSTD
    assert header.is_transactional and header.is_control and header.timestamp_type == 1
    assert header.attributes == 4 | 0x08 | 0x10 | 0x20
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 3, 1000)
    assert header.last_sequence == 1000


def test_size_in_bytes_is_exact_for_uncompressed_batches() -> None:
    builder = BatchBuilder()
    assert builder.size_in_bytes == HEADER_SIZE
    builder.append(TS, b"key", b"v" * 300, [("h", b"x"), ("n", None)])
    builder.append(TS + 100_000, None, None)
    builder.append(TS - 1, b"k" * 9000, b"")  # three-byte length varints
    assert builder.size_in_bytes == len(builder.build())
    assert builder.record_count == 3


def test_batch_size_refuses_the_record_that_would_not_fit() -> None:
    builder = BatchBuilder(batch_size=1000)
    accepted = 0
    while builder.append(TS, b"key", b"x" * 100):
        accepted += 1
    assert accepted == 8  # 61 + 8 * 112 = 957; a ninth would make 1069
    data = builder.build()
    assert len(data) == builder.size_in_bytes <= 1000
    assert len(list(iter_batches_records(data))) == 8


def test_first_record_is_accepted_however_large() -> None:
    builder = BatchBuilder(batch_size=100)
    assert builder.append(TS, None, b"x" * 5000)
    assert not builder.append(TS, None, b"y")
    (record,) = iter_batches_records(builder.build())
    assert record.value == b"x" * 5000


def test_build_again_after_more_appends() -> None:
    builder = BatchBuilder()
    builder.append(TS, b"a", b"1")
    first = builder.build()
    assert builder.build() == first  # deterministic
    builder.append(TS + 1, b"b", b"2")
    assert [r.key for r in iter_batches_records(builder.build())] == [b"a", b"b"]


def test_bytes_like_keys_are_copied_on_append() -> None:
    key = bytearray(b"mutable")
    builder = BatchBuilder()
    builder.append(TS, key, memoryview(b"view"))  # type: ignore[arg-type]
    key[:] = b"changed"
    (record,) = iter_batches_records(builder.build())
    assert (record.key, record.value) == (b"mutable", b"view")


def test_wrong_types_and_values_are_refused() -> None:
    builder = BatchBuilder()
    with pytest.raises(TypeError, match="key must be bytes"):
        builder.append(TS, "text", b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="value must be bytes"):
        builder.append(TS, None, 42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="invalid timestamp"):
        builder.append(-2, None, b"v")
    builder.append(TS, None, b"v")
    with pytest.raises(ValueError, match="invalid timestamp"):
        builder.append(-5, None, b"v")
    with pytest.raises(TypeError, match="header key must be str"):
        builder.append(TS, None, b"v", [(b"raw", b"v")])  # type: ignore[list-item]
    assert builder.record_count == 1  # refused appends add nothing
    with pytest.raises(ValueError, match="at least one record"):
        BatchBuilder().build()
    with pytest.raises(ValueError, match="timestamp type"):
        BatchBuilder(timestamp_type=2)


def test_no_timestamp_is_allowed() -> None:
    builder = BatchBuilder()
    builder.append(-1, None, b"v")
    header = validate_batch(builder.build())
    assert header.base_timestamp == header.max_timestamp == -1


def test_out_of_range_producer_fields_raise_value_error() -> None:
    builder = BatchBuilder(producer_epoch=1 << 15)
    builder.append(TS, None, b"v")
    with pytest.raises(ValueError, match="out of range"):
        builder.build()


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.config_name)
def test_every_codec_builds_a_valid_batch(codec: CompressionType) -> None:
    builder = BatchBuilder(codec)
    expected = []
    for i in range(300):
        key = None if i % 7 == 0 else b"key-%d" % i
        value = b"value-%d " % i * (i % 5)
        headers: list[Header] = [("i", str(i).encode())] if i % 3 == 0 else []
        builder.append(TS + i * 3 - 50, key, value, headers)
        expected.append(Record(i, TS + i * 3 - 50, key, value, headers))
    data = builder.build()
    header = validate_batch(data)
    assert header.compression == codec
    assert header.records_count == 300
    assert list(iter_batches_records(data)) == expected
