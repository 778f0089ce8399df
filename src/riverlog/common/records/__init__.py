"""Kafka's RecordBatch v2: the one byte format written by producers, stored and replicated by
storage nodes, and read by consumers.

Producers encode with `BatchBuilder`; storage nodes work on headers only (`header`); consumers
decode with `iter_batches_records` or, for Arrow, `decode_columns`.
"""

from .aborted import AbortedFilter
from .builder import BatchBuilder, encode_headers
from .compression import CompressionType, compress, decompress
from .header import (
    HEADER_SIZE,
    BatchHeader,
    InvalidBatchError,
    iter_batches,
    parse_header,
    peek_size,
    validate_batch,
)
from .reader import (
    RecordColumns,
    decode_columns,
    iter_batches_records,
    iter_record_timestamps,
    next_fetch_offset,
)
from .record import CREATE_TIME, LOG_APPEND_TIME, Header, Record

__all__ = [
    "CREATE_TIME",
    "HEADER_SIZE",
    "LOG_APPEND_TIME",
    "AbortedFilter",
    "BatchBuilder",
    "BatchHeader",
    "CompressionType",
    "Header",
    "InvalidBatchError",
    "Record",
    "RecordColumns",
    "compress",
    "decode_columns",
    "decompress",
    "encode_headers",
    "iter_batches",
    "iter_batches_records",
    "iter_record_timestamps",
    "next_fetch_offset",
    "parse_header",
    "peek_size",
    "validate_batch",
]
