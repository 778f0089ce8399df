"""Golden bytes: batches written by Kafka itself and by kafka-python, read by our decoder, and
our encoder's output compared byte for byte where the format is deterministic."""

from __future__ import annotations

import pytest

from riverlog.common.records import (
    BatchBuilder,
    CompressionType,
    Record,
    decode_columns,
    iter_batches_records,
    parse_header,
    validate_batch,
)

# Four batches written by a Kafka 0.11 broker (live data), as published in kafka-python's
# test/record/test_records.py: offsets 0 ("123"), 1-2 ("", ""), 3 ("123"), then a batch at
# offset 0 again with value "hdr" and header hkey=hval. CRCs are Kafka's own.
KAFKA_BROKER_BATCHES = bytes.fromhex(
    "00000000000000000000003b00000001020318a2700000000000000000015dff7b063c0000015dff7b063cff"
    "ffffffffffffffffffffffffff00000001120000000106313233000000000000000001000000400000000202"
    "c85cbd230000000000010000015dff7cdd6c0000015dff7cde14ffffffffffffffffffffffffffff00000002"
    "0c0000000100000e00d0020201000000000000000000030000003b00000002022e0b85b70000000000000000"
    "015dff7ce79d0000015dff7ce79dffffffffffffffffffffffffffff00000001120000000106313233000000"
    "0000000000000000004500000000025cd8ef520000000000000000016585b6f3c10000016585b6f3c1ffffff"
    "ffffffffffffffffffffff000000012600000001066864720208686b6579086876616c"
)
# A single-record control batch (abort marker) from kafka-python's test_records.py; its CRC is
# a placeholder, so it is read with validate_crc=False.
KAFKA_CONTROL_BATCH = bytes.fromhex(
    "00000000000000000000005200000000026597ffd0002000000000000000000098967f000000000098967fff"
    "ffffffffffffffffffffffffff000000014000000008000000002c6f70617175652d636f6e74726f6c2d6d65"
    "737361676500"
)
# Written by kafka-python 3.0.12 (pip, in a throwaway venv; not a project dependency), with
# kafka.record.default_records.DefaultRecordBatchBuilder(magic=2, compression_type=<id>,
# is_transactional=False, producer_id=-1, producer_epoch=-1, base_sequence=-1), appending the
# records of GOLDEN_RECORDS at offsets 0..4 and calling build(). kafka-python writes partition
# leader epoch 0 where Kafka's Java producer writes -1; the leader overwrites it either way.
# KP_IDEMPOTENT_TXN: the same records, compression none, producer_id=123456, producer_epoch=7,
# base_sequence=42, is_transactional=True.
KP_NONE = bytes.fromhex(
    "0000000000000000000001c80000000002847a1d450000000000040000018bcfe568000000018bcfe58b28ff"
    "ffffffffffffffffffffffffff000000054e0000000a6b65792d303876616c75652d3076616c75652d307661"
    "6c75652d3076616c75652d300072000a0201366e756c6c206b6579206e756c6c206b6579206e756c6c206b65"
    "7920060a7472616365066162630a656d707479000a6e756c6c7601160013040a6b65792d3201001c00c80106"
    "0000020668c3a90400ffb00400d08c01088c016b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b"
    "6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b"
    "6b90037676767676767676767676767676767676767676767676767676767676767676767676767676767676"
    "7676767676767676767676767676767676767676767676767676767676767676767676767676767676767676"
    "7676767676767676767676767676767676767676767676767676767676767676767676767676767676767676"
    "7676767676767676767676767676767676767676767676767676767676767676767676767676767676767676"
    "76767676767676767676767676767676767676767676767676767600"
)
KP_GZIP = bytes.fromhex(
    "0000000000000000000000ac00000000020ef8767b0001000000040000018bcfe568000000018bcfe58b28ff"
    "ffffffffffffffffffffffffff000000051f8b0800e92a026b02fff3636060e0ca4eadd435b0284bcc294dd5"
    "35c04a3114317031319ae595e6e42800552b6032d8b84a8a129353d9129392b952730b4a2a19b84072658c62"
    "0cc22c601b8c181964184e30b2313030b1651c5ec9c2f07f030bc3851e468e1ec66caa8009cc65c304300000"
    "b173ea8297010000"
)
KP_SNAPPY = bytes.fromhex(
    "0000000000000000000000c30000000002dce8f7190002000000040000018bcfe568000000018bcfe58b28ff"
    "ffffffffffffffffffffffffff0000000582534e415050590000000001000000010000007e9703444e000000"
    "0a6b65792d303876616c75652d305207003c0072000a0201366e756c6c206b65792046090048060a74726163"
    "65066162630a656d707479000a01251476011600130405626c3201001c00c801060000020668c3a90400ffb0"
    "0400d08c01088c016bfe0100050108900376fe0100fe0100fe01000d010000"
)
KP_LZ4 = bytes.fromhex(
    "0000000000000000000000c10000000002eeeb80a40003000000040000018bcfe568000000018bcfe58b28ff"
    "ffffffffffffffffffffffffff0000000504224d18684097010000000000001279000000ff034e0000000a6b"
    "65792d303876616c75652d30070002fe010072000a0201366e756c6c206b6579200900f004060a7472616365"
    "066162630a656d707479000a2500617601160013046200ff0d3201001c00c801060000020668c3a90400ffb0"
    "0400d08c01088c016b0100323f9003760100b050767676760000000000"
)
KP_ZSTD = bytes.fromhex(
    "0000000000000000000000ab0000000002561c47f70004000000040000018bcfe568000000018bcfe58b28ff"
    "ffffffffffffffffffffffffff0000000528b52ffd609700850300b4054e0000000a6b65792d303876616c75"
    "652d300072000a0201366e756c6c206b657920060a7472616365066162630a656d707479000a760116001304"
    "3201001c00c801060000020668c3a90400ffb00400d08c01088c016b90037600060044400d0447ae0c522215"
    "042c1ea0afd801"
)
KP_IDEMPOTENT_TXN = bytes.fromhex(
    "0000000000000000000001c800000000020716bb3b0010000000040000018bcfe568000000018bcfe58b2800"
    "0000000001e24000070000002a000000054e0000000a6b65792d303876616c75652d3076616c75652d307661"
    "6c75652d3076616c75652d300072000a0201366e756c6c206b6579206e756c6c206b6579206e756c6c206b65"
    "7920060a7472616365066162630a656d707479000a6e756c6c7601160013040a6b65792d3201001c00c80106"
    "0000020668c3a90400ffb00400d08c01088c016b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b"
    "6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b6b"
    "6b90037676767676767676767676767676767676767676767676767676767676767676767676767676767676"
    "7676767676767676767676767676767676767676767676767676767676767676767676767676767676767676"
    "7676767676767676767676767676767676767676767676767676767676767676767676767676767676767676"
    "7676767676767676767676767676767676767676767676767676767676767676767676767676767676767676"
    "76767676767676767676767676767676767676767676767676767600"
)

GOLDEN_RECORDS: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (1_700_000_000_000, b"key-0", b"value-0" * 4, []),
    (
        1_700_000_000_005,
        None,
        b"null key " * 3,
        [("trace", b"abc"), ("empty", b""), ("nullv", None)],
    ),
    (1_699_999_999_990, b"key-2", None, []),  # negative timestamp delta, null value
    (1_700_000_000_100, b"", b"", [("h\u00e9", b"\x00\xff")]),  # empty key/value, UTF-8 key
    (1_700_000_009_000, b"k" * 70, b"v" * 200, []),  # two-byte varints everywhere
]

KAFKA_PYTHON_BATCHES = {
    CompressionType.NONE: KP_NONE,
    CompressionType.GZIP: KP_GZIP,
    CompressionType.SNAPPY: KP_SNAPPY,
    CompressionType.LZ4: KP_LZ4,
    CompressionType.ZSTD: KP_ZSTD,
}


def expected_records() -> list[Record]:
    return [
        Record(offset, ts, key, value, headers)
        for offset, (ts, key, value, headers) in enumerate(GOLDEN_RECORDS)
    ]


def build_golden(compression: CompressionType = CompressionType.NONE, **kwargs: object) -> bytes:
    builder = BatchBuilder(compression, partition_leader_epoch=0, **kwargs)  # type: ignore[arg-type]
    for record in GOLDEN_RECORDS:
        assert builder.append(*record)
    return builder.build()


def test_reads_batches_written_by_a_kafka_broker() -> None:
    records = list(iter_batches_records(KAFKA_BROKER_BATCHES))
    assert [(r.offset, r.key, r.value, r.headers) for r in records] == [
        (0, None, b"123", []),
        (1, None, b"", []),
        (2, None, b"", []),
        (3, None, b"123", []),
        (0, None, b"hdr", [("hkey", b"hval")]),
    ]
    assert records[0].timestamp == 1503229838908
    assert all(r.timestamp_type == 0 for r in records)


def test_broker_batches_pass_crc_validation() -> None:
    pos = 0
    sizes = []
    while pos < len(KAFKA_BROKER_BATCHES):
        header = validate_batch(KAFKA_BROKER_BATCHES, pos)
        sizes.append(header.size)
        pos += header.size
    assert sizes == [71, 76, 71, 81]


def test_reads_a_kafka_control_batch_only_when_asked() -> None:
    assert list(iter_batches_records(KAFKA_CONTROL_BATCH, validate_crc=False)) == []
    (marker,) = iter_batches_records(KAFKA_CONTROL_BATCH, validate_crc=False, include_control=True)
    assert marker.key == b"\x00\x00\x00\x00"  # version 0, type 0: ABORT
    assert marker.value == b"opaque-control-message"
    header = parse_header(KAFKA_CONTROL_BATCH)
    assert header.is_control and header.attributes == 0x20


def test_encoder_is_byte_identical_to_kafka_python_uncompressed() -> None:
    assert build_golden() == KP_NONE


def test_encoder_is_byte_identical_with_producer_fields() -> None:
    ours = build_golden(
        producer_id=123456, producer_epoch=7, base_sequence=42, is_transactional=True
    )
    assert ours == KP_IDEMPOTENT_TXN
    header = validate_batch(ours)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (123456, 7, 42)
    assert header.is_transactional and not header.is_control


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.config_name)
def test_decodes_kafka_python_batches(codec: CompressionType) -> None:
    data = KAFKA_PYTHON_BATCHES[codec]
    assert validate_batch(data).compression == codec
    assert list(iter_batches_records(data)) == expected_records()


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.config_name)
def test_our_compressed_batches_carry_the_same_header_and_records(codec: CompressionType) -> None:
    ours = build_golden(codec)
    theirs = parse_header(KAFKA_PYTHON_BATCHES[codec])
    header = validate_batch(ours)
    # Everything but the length and CRC (the compressed bytes differ by library) is identical.
    assert header.attributes == theirs.attributes
    assert (header.base_timestamp, header.max_timestamp) == (1_700_000_000_000, 1_700_000_009_000)
    assert (header.base_timestamp, header.max_timestamp) == (
        theirs.base_timestamp,
        theirs.max_timestamp,
    )
    assert header.last_offset_delta == theirs.last_offset_delta == 4
    assert list(iter_batches_records(ours)) == expected_records()


def test_columns_of_kafka_python_batches() -> None:
    data = b"".join(KAFKA_PYTHON_BATCHES.values())
    columns = decode_columns(data)
    assert columns.offsets == [0, 1, 2, 3, 4] * 5
    assert columns.keys[:5] == [r[1] for r in GOLDEN_RECORDS]
    assert columns.values[:5] == [r[2] for r in GOLDEN_RECORDS]
    assert columns.headers[1] == [("trace", b"abc"), ("empty", b""), ("nullv", None)]
    assert columns.timestamps[2] == 1_699_999_999_990
    assert columns.timestamp_types == [0] * 25
    assert columns.next_offset == 5
