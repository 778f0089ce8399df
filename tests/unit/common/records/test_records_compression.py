"""The five codecs: names, the exact stream formats Kafka expects, and corrupt input."""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

from riverlog.common.records import CompressionType, InvalidBatchError, compress, decompress
from riverlog.common.records.compression import XERIAL_HEADER

CODECS = list(CompressionType)
COMPRESSED = [c for c in CompressionType if c != CompressionType.NONE]
# Compressible but not trivial, and longer than one xerial block (32 KiB) and one lz4 block
# (64 KiB), so multi-block framing is exercised.
PAYLOAD = b"".join(b"record %06d " % i + os.urandom(8) for i in range(6000))


def test_names_match_kafka_compression_type_values() -> None:
    assert [c.config_name for c in CompressionType] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert [int(c) for c in CompressionType] == [0, 1, 2, 3, 4]
    assert CompressionType.from_name("zstd") is CompressionType.ZSTD
    assert CompressionType.from_name(" LZ4 ") is CompressionType.LZ4
    with pytest.raises(ValueError, match="one of none, gzip, snappy, lz4, zstd"):
        CompressionType.from_name("brotli")


def test_codec_from_attributes() -> None:
    assert CompressionType.from_attributes(0x0B) is CompressionType.LZ4  # 3 | timestamp type
    with pytest.raises(InvalidBatchError, match="unknown compression type id 5"):
        CompressionType.from_attributes(5)
    with pytest.raises(InvalidBatchError, match="unknown compression type id 7"):
        decompress(7, b"x")


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.config_name)
@pytest.mark.parametrize("data", [b"", b"x", PAYLOAD], ids=["empty", "one-byte", "large"])
def test_round_trip(codec: CompressionType, data: bytes) -> None:
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, memoryview(compress(codec, data))) == data


def test_compressed_streams_are_smaller() -> None:
    for codec in COMPRESSED:
        assert len(compress(codec, PAYLOAD)) < len(PAYLOAD) * 0.8, codec


def test_gzip_is_a_gzip_member_readable_by_the_stdlib() -> None:
    stream = compress(CompressionType.GZIP, PAYLOAD)
    assert stream[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(stream) == PAYLOAD
    assert compress(CompressionType.GZIP, PAYLOAD) == stream  # deterministic (mtime 0)


def test_gzip_reader_accepts_several_members_and_zlib() -> None:
    two = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(CompressionType.GZIP, two) == b"first second"
    assert decompress(CompressionType.GZIP, zlib.compress(b"zlib")) == b"zlib"


def test_snappy_is_xerial_framed_like_java() -> None:
    stream = compress(CompressionType.SNAPPY, PAYLOAD)
    assert stream[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) == XERIAL_HEADER
    pos, blocks, out = 16, 0, b""
    while pos < len(stream):
        (length,) = struct.unpack_from(">i", stream, pos)
        block = bytes(cramjam.snappy.decompress_raw(stream[pos + 4 : pos + 4 + length]))
        assert len(block) <= 32 * 1024  # Java's SnappyOutputStream block size
        out += block
        pos += 4 + length
        blocks += 1
    assert out == PAYLOAD
    assert blocks == -(-len(PAYLOAD) // (32 * 1024))


def test_snappy_reader_accepts_a_raw_block() -> None:
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert decompress(CompressionType.SNAPPY, raw) == PAYLOAD


def test_lz4_is_a_frame_as_kafka_writes_it() -> None:
    stream = compress(CompressionType.LZ4, PAYLOAD)
    assert stream[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    flg, bd = stream[4], stream[5]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # independent blocks
    assert not flg & 0x10  # no block checksum
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum
    assert bd == 0x40  # 64 KiB maximum block size
    assert lz4.frame.decompress(stream) == PAYLOAD


def test_zstd_reader_accepts_frames_without_content_size() -> None:
    streaming = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    assert zstandard.frame_content_size(streaming) == -1
    assert decompress(CompressionType.ZSTD, streaming) == PAYLOAD
    two_frames = streaming + zstandard.ZstdCompressor().compress(b"tail")
    assert decompress(CompressionType.ZSTD, two_frames) == PAYLOAD + b"tail"


def test_levels_are_honoured() -> None:
    fast = compress(CompressionType.GZIP, PAYLOAD, level=1)
    best = compress(CompressionType.GZIP, PAYLOAD, level=9)
    assert len(best) < len(fast)
    assert decompress(CompressionType.GZIP, fast) == PAYLOAD
    assert decompress(CompressionType.ZSTD, compress(CompressionType.ZSTD, PAYLOAD, 19)) == PAYLOAD
    assert decompress(CompressionType.LZ4, compress(CompressionType.LZ4, PAYLOAD, 12)) == PAYLOAD


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.config_name)
def test_truncated_stream_raises_invalid_batch(codec: CompressionType) -> None:
    stream = compress(codec, PAYLOAD)
    with pytest.raises(InvalidBatchError):
        decompress(codec, stream[: len(stream) - 7])


@pytest.mark.parametrize("codec", COMPRESSED, ids=lambda c: c.config_name)
def test_garbage_raises_invalid_batch(codec: CompressionType) -> None:
    with pytest.raises(InvalidBatchError):
        decompress(codec, b"\xff\xfe definitely not compressed \x00\x01" * 3)


def test_corrupt_xerial_block_lengths_raise_invalid_batch() -> None:
    with pytest.raises(InvalidBatchError, match="overruns"):
        decompress(CompressionType.SNAPPY, XERIAL_HEADER + struct.pack(">i", -5) + b"abc")
    with pytest.raises(InvalidBatchError, match="overruns"):
        decompress(CompressionType.SNAPPY, XERIAL_HEADER + struct.pack(">i", 1 << 30) + b"abc")
    with pytest.raises(InvalidBatchError, match="block length"):
        decompress(CompressionType.SNAPPY, XERIAL_HEADER + b"\x00\x00")
