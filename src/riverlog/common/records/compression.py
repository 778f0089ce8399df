"""The five compression codecs of a RecordBatch v2, written as Kafka's Java client writes them.

A compressed batch keeps its 61-byte header in the clear and compresses only the records after
it, as one stream; attributes bits 0-2 name the codec. The streams, per codec:

    id  name    stream                                               library
    0   none    the records as they are                              -
    1   gzip    a gzip member (RFC 1952); readers accept several     zlib (stdlib)
    2   snappy  xerial framing, as Java's SnappyOutputStream:        cramjam
                  b"\\x82SNAPPY\\x00" | int32 version=1 | int32 compat=1
                  then [int32 block length | raw snappy block]*, blocks of <= 32 KiB input;
                readers also accept one bare raw snappy block
    3   lz4     an LZ4 frame (lz4 spec v1.6, as Kafka 0.10+): 64 KiB    lz4.frame
                independent blocks, no content size, no checksums
    4   zstd    zstd frame(s); readers accept frames without a content   zstandard
                size (Java's zstd-jni streams omit it)

Default levels are Kafka's (`compression.gzip.level` 6, `compression.lz4.level` 9 = the fast
compressor, `compression.zstd.level` 3). Every decompression failure becomes InvalidBatchError,
so a corrupt batch never leaks a codec library's own exception type.
"""

from __future__ import annotations

import enum
import struct
import zlib
from typing import Final

import cramjam
import lz4.frame
import zstandard

from .header import InvalidBatchError


class CompressionType(enum.IntEnum):
    """The codec id in attributes bits 0-2; `config_name` is the `compression.type` value."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def config_name(self) -> str:
        """Kafka's name for the codec: none, gzip, snappy, lz4 or zstd."""
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """The codec for a `compression.type` value (case-insensitive); ValueError otherwise."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            allowed = ", ".join(c.config_name for c in cls)
            raise ValueError(f"unknown compression type {name!r} (one of {allowed})") from None

    @classmethod
    def from_attributes(cls, attributes: int) -> CompressionType:
        """The codec named by a batch's attributes; InvalidBatchError for ids 5-7."""
        codec = attributes & 0x07
        if codec > 4:
            raise InvalidBatchError(f"unknown compression type id {codec}")
        return cls(codec)


DEFAULT_LEVELS: Final[dict[CompressionType, int]] = {
    CompressionType.GZIP: 6,
    CompressionType.LZ4: 9,
    CompressionType.ZSTD: 3,
}
"""Kafka's default level per codec (snappy and none have no level)."""

_LZ4_FAST_LEVEL: Final = 9  # Kafka maps its default lz4 level to the fast compressor
_GZIP_WBITS: Final = 16 + zlib.MAX_WBITS  # gzip wrapper, mtime 0: deterministic bytes
_GZIP_OR_ZLIB_WBITS: Final = 32 + zlib.MAX_WBITS

XERIAL_HEADER: Final = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_MAGIC: Final = XERIAL_HEADER[:8]
_XERIAL_BLOCK_SIZE: Final = 32 * 1024
_INT32: Final = struct.Struct(">i")

_CODEC_ERRORS: Final = (
    ValueError,
    RuntimeError,
    zlib.error,
    zstandard.ZstdError,
    cramjam.DecompressionError,
)
_zstd_decompressor = zstandard.ZstdDecompressor()
_zstd_compressors: dict[int, zstandard.ZstdCompressor] = {}


def compress(codec: CompressionType, data: bytes, level: int | None = None) -> bytes:
    """The records region `data` compressed with `codec`, at `level` (None: Kafka's default)."""
    if codec == CompressionType.NONE:
        return data
    if level is None:
        level = DEFAULT_LEVELS.get(codec, 0)
    if codec == CompressionType.GZIP:
        deflater = zlib.compressobj(level, zlib.DEFLATED, _GZIP_WBITS)
        return deflater.compress(data) + deflater.flush()
    if codec == CompressionType.SNAPPY:
        return _xerial_compress(data)
    if codec == CompressionType.LZ4:
        return bytes(
            lz4.frame.compress(
                data,
                compression_level=0 if level == _LZ4_FAST_LEVEL else level,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                block_checksum=False,
                store_size=False,
            )
        )
    if codec == CompressionType.ZSTD:
        compressor = _zstd_compressors.get(level)
        if compressor is None:
            compressor = _zstd_compressors[level] = zstandard.ZstdCompressor(level=level)
        return bytes(compressor.compress(data))
    raise ValueError(f"unknown compression type {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The records region of a batch compressed with `codec`; InvalidBatchError if corrupt."""
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if codec == CompressionType.GZIP:
            return _gzip_decompress(data)
        if codec == CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if codec == CompressionType.LZ4:
            return bytes(lz4.frame.decompress(data))
        if codec == CompressionType.ZSTD:
            return _zstd_decompress(data)
    except InvalidBatchError:
        raise
    except (
        ValueError,
        RuntimeError,
        zlib.error,
        zstandard.ZstdError,
        cramjam.DecompressionError,
    ) as e:
        name = CompressionType(codec).config_name
        raise InvalidBatchError(f"corrupt {name} records: {e}") from e
    raise InvalidBatchError(f"unknown compression type id {codec}")


def _gzip_decompress(data: bytes | memoryview) -> bytes:
    out: list[bytes] = []
    rest = bytes(data)
    while True:
        inflater = zlib.decompressobj(_GZIP_OR_ZLIB_WBITS)
        out.append(inflater.decompress(rest))
        if not inflater.eof:
            raise InvalidBatchError("truncated gzip stream")
        rest = inflater.unused_data
        if not rest:
            return b"".join(out)


def _xerial_compress(data: bytes) -> bytes:
    parts = [XERIAL_HEADER]
    view = memoryview(data)
    pack = _INT32.pack
    for start in range(0, len(data), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_SIZE]))
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    data = bytes(data)
    if data[:8] != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(data))
    if len(data) < len(XERIAL_HEADER):
        raise InvalidBatchError("truncated xerial snappy header")
    out: list[bytes] = []
    pos = len(XERIAL_HEADER)
    end = len(data)
    unpack = _INT32.unpack_from
    while pos < end:
        if end - pos < 4:
            raise InvalidBatchError("truncated xerial snappy block length")
        (length,) = unpack(data, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise InvalidBatchError(f"xerial snappy block of {length} bytes overruns the stream")
        out.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + length])))
        pos += length
    return b"".join(out)


def _zstd_decompress(data: bytes | memoryview) -> bytes:
    out: list[bytes] = []
    rest = bytes(data)
    while True:
        reader = _zstd_decompressor.decompressobj()
        out.append(reader.decompress(rest))
        if not reader.eof:
            raise InvalidBatchError("truncated zstd frame")
        rest = reader.unused_data
        if not rest:
            return b"".join(out)
