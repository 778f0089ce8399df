"""One partition's share of one fetch answer (a `Chunk`), and its records as poll() hands them
out (`ConsumerRecord`).

A chunk is created when its fetch is sent and filled when the answer arrives; the fetcher keeps
a partition's chunks in offset order (`fetcher.py`), so several can be in flight at once. Once
answered, a chunk knows the offsets it answers for: from `start` (the fetch offset, or the
first batch's base offset when the batch holding the fetch offset starts before it) up to
`next_offset` (past its last complete batch). Its bytes are decoded only when poll() reaches
it, a chunk at a time, straight into ConsumerRecord tuples by the codec's `decode_rows` (the C
record loop when it is built, else the columnar reader and `map(tuple.__new__, zip)`): no
Python code runs per record unless deserializers are set.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

from riverlog.common.records.aborted import AbortedFilter, AbortedTransaction
from riverlog.common.records.header import LOG_OVERHEAD, peek_size
from riverlog.common.records.reader import decode_rows, next_fetch_offset
from riverlog.common.records.record import Header
from riverlog.common.types import TopicPartition

_BASE_OFFSET = struct.Struct(">q")


class ConsumerRecord(NamedTuple):
    """A record as poll() returns it. `timestamp_type`: 0 create time, 1 log append time.
    `headers`: (key, value) pairs in wire order; `key`/`value` None when null."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: Any
    value: Any
    headers: list[Header]


class Chunk:
    """One partition's part of one fetch: in flight until `answer()`, then drained record by
    record by poll(). `epoch` is the partition state's epoch when it was sent (a seek or a new
    assignment changes it, and the chunk is then stale)."""

    __slots__ = (
        "aborted",
        "data",
        "done",
        "end",
        "epoch",
        "fetch_offset",
        "full",
        "index",
        "max_bytes",
        "next_offset",
        "offset",
        "records",
        "start",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        epoch: int,
        fetch_offset: int,
        max_bytes: int,
        full: int | None = None,
    ) -> None:
        self.tp = tp
        self.epoch = epoch
        self.fetch_offset = fetch_offset
        self.max_bytes = max_bytes
        # max.partition.fetch.bytes in effect when sent (a gap's fill asks for less)
        self.full = max_bytes if full is None else full
        self.done = False
        # the answer's records are data[offset:end]: a range of the message, or of the buffer
        # a direct fetch read them into (a bytearray)
        self.data: bytes | bytearray = b""
        self.offset = 0
        self.end = 0
        self.aborted: Sequence[AbortedTransaction] = ()
        self.start = fetch_offset
        self.next_offset = fetch_offset
        self.records: list[ConsumerRecord] | None = None
        self.index = 0

    def answer(
        self,
        data: bytes | bytearray,
        stable_end: int | None = None,
        aborted: Sequence[AbortedTransaction] = (),
        start: int = 0,
        end: int | None = None,
    ) -> bool:
        """Take the answer's bytes, data[start:end] (kept as a range of `data`, which is the
        whole received message: no copy); False (and nothing taken) when they hold no complete
        batch past the fetch offset. read_committed: `stable_end` is the last stable offset,
        and batches at or past it are cut (the position stops there); `aborted` are the
        answer's aborted transactions, whose records decode drops."""
        if end is None:
            end = len(data)
        fetch_offset = self.fetch_offset
        next_offset = (
            next_fetch_offset(data, fetch_offset, start, end) if end > start else fetch_offset
        )
        if stable_end is not None and next_offset > stable_end:
            end = _below(data, start, end, stable_end)
            next_offset = (
                next_fetch_offset(data, fetch_offset, start, end) if end > start else fetch_offset
            )
        if next_offset == fetch_offset:
            return False
        self.aborted = aborted
        self.data = data
        self.offset = start
        self.end = end
        self.next_offset = next_offset
        self.start = min(fetch_offset, _BASE_OFFSET.unpack_from(data, start)[0])
        self.done = True
        return True

    def decode(self, position: int, check_crcs: bool) -> list[ConsumerRecord]:
        """The records at or after `position` (which is at least `start`), once; the bytes are
        released."""
        records = self.records
        if records is None:
            tp = self.tp
            records = self.records = decode_rows(
                self.data,
                position,
                ConsumerRecord,
                tp.topic,
                tp.partition,
                validate_crc=check_crcs,
                aborted=AbortedFilter(self.aborted) if self.aborted else None,
                start=self.offset,
                end=self.end,
            )
            self.data = b""
        return records

    def __repr__(self) -> str:
        state = f"[{self.start}, {self.next_offset})" if self.done else "in flight"
        return f"<Chunk {self.tp} @{self.fetch_offset} {state} epoch {self.epoch}>"


def _below(data: bytes | bytearray, start: int, end: int, stable_end: int) -> int:
    """Where the whole batches of data[start:end] that start below `stable_end` end (the last
    stable offset is always a batch's first offset: an open transaction's first batch, or the
    high watermark)."""
    position = start
    while end - position >= LOG_OVERHEAD and (size := peek_size(data, position)) > 0:
        if _BASE_OFFSET.unpack_from(data, position)[0] >= stable_end:
            return position
        position += size
    return end
