"""The read_committed filter (Kafka's CompletedFetch): aborted transactions' batches and every
marker are dropped, committed and non-transactional batches kept, on every decode path."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from riverlog.common.records import record_loop
from riverlog.common.records.aborted import AbortedFilter
from riverlog.common.records.builder import BatchBuilder
from riverlog.common.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker
from riverlog.common.records.header import set_base_offset
from riverlog.common.records.reader import (
    decode_columns,
    decode_rows,
    iter_batches_records,
    records_wire,
)

pytestmark = pytest.mark.timeout(30)


class Row(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


class Log:
    """Batches appended at consecutive offsets, as a partition leader assigns them."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.next_offset = 0

    def _append(self, batch: bytes, count: int) -> None:
        pos = len(self.data)
        self.data += batch
        set_base_offset(self.data, pos, self.next_offset)
        self.next_offset += count

    def data_batch(self, producer_id: int, count: int, transactional: bool = True) -> None:
        builder = BatchBuilder(
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=transactional,
        )
        for i in range(count):
            builder.append(1_000, None, f"{producer_id}:{self.next_offset + i}".encode())
        self._append(builder.build(), count)

    def marker(self, producer_id: int, kind: ControlRecordType) -> None:
        self._append(build_end_txn_marker(EndTxnMarker(kind, 0), producer_id, 1, 1_000), 1)


def interleaved() -> Log:
    """Producer 1 aborts at 0-1 (marker 5) and commits at 8-9; producer 2 commits at 2-3
    (marker 6); a plain producer writes at 4 and 7."""
    log = Log()
    log.data_batch(1, 2)  # 0-1 aborted
    log.data_batch(2, 2)  # 2-3 committed
    log.data_batch(9, 1, transactional=False)  # 4
    log.marker(1, ControlRecordType.ABORT)  # 5
    log.marker(2, ControlRecordType.COMMIT)  # 6
    log.data_batch(9, 1, transactional=False)  # 7
    log.data_batch(1, 2)  # 8-9 committed: producer 1's abort range ended at 5
    log.marker(1, ControlRecordType.COMMIT)  # 10
    return log


KEPT = [2, 3, 4, 7, 8, 9]


def test_aborted_batches_and_markers_are_dropped_on_every_path() -> None:
    data = bytes(interleaved().data)
    assert [r.offset for r in iter_batches_records(data, aborted=AbortedFilter([(1, 0)]))] == KEPT
    assert decode_columns(data, aborted=AbortedFilter([(1, 0)])).offsets == KEPT
    rows = decode_rows(data, 0, Row, "t", 0, aborted=AbortedFilter([(1, 0)]))
    assert [r.offset for r in rows] == KEPT
    assert [r.value for r in rows][:2] == [b"2:2", b"2:3"]


def test_the_gateways_wire_path_drops_them_too() -> None:
    if not record_loop.compiled():
        pytest.skip("records_wire is C only")
    data = bytes(interleaved().data)
    _, count, last = records_wire(data, 0, aborted=AbortedFilter([(1, 0)]))
    assert (count, last) == (len(KEPT), 9)


def test_without_aborted_transactions_everything_but_markers_is_read() -> None:
    data = bytes(interleaved().data)
    everything = [0, 1, 2, 3, 4, 7, 8, 9]
    assert [r.offset for r in iter_batches_records(data, aborted=AbortedFilter([]))] == everything
    assert [r.offset for r in iter_batches_records(data)] == everything


def test_an_aborted_transaction_starting_later_drops_only_from_its_first_offset() -> None:
    # Producer 1's batch at 8-9 was aborted instead (its range starts at 8, not 0).
    log = interleaved()
    log.data_batch(1, 1)  # 11
    log.marker(1, ControlRecordType.ABORT)  # 12
    data = bytes(log.data)
    kept = [r.offset for r in iter_batches_records(data, aborted=AbortedFilter([(1, 11)]))]
    assert kept == [0, 1, 2, 3, 4, 7, 8, 9]


def test_a_fetch_starting_inside_an_aborted_range_drops_from_the_start() -> None:
    log = interleaved()
    data = bytes(log.data)
    # Reading from offset 1: the aborted transaction began before the fetch offset.
    kept = [r.offset for r in iter_batches_records(data, 1, aborted=AbortedFilter([(1, 0)]))]
    assert kept == KEPT


def test_an_exhausted_filter_is_false() -> None:
    f = AbortedFilter([])
    assert not f
    assert AbortedFilter([(1, 0)])
