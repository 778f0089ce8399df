"""Transaction-aware cleaning (KIP-98): the data of aborted transactions goes and never hides
an earlier committed record of its key, markers stay while data of their transaction is left,
then after their delete horizon (two passes) they go, the cleaned .txnindex keeps only the
aborted transactions whose markers stay, and the pass never reaches an open transaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_cleaner_testkit import clean, compact_config, open_compacted, records
from storage_log_testkit import read_bytes

from riverlog.common.clock import ManualClock
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.records.control import (
    ControlRecordType,
    EndTxnMarker,
    build_end_txn_marker,
    parse_end_txn_marker,
)
from riverlog.common.records.header import iter_batches, parse_header
from riverlog.services.storage.log import AppendOrigin, PartitionLog
from riverlog.services.storage.log.cleaner.batch_filter import filter_batch
from riverlog.services.storage.log.cleaner.offset_map import OffsetMap
from riverlog.services.storage.log.cleaner.txn_metadata import CleanedTxnMetadata
from riverlog.services.storage.log.txn_index import AbortedTxn
from riverlog.services.storage.producer import ProducerStateManager

pytestmark = pytest.mark.timeout(30)
TS = 1_700_000_000_000


def txn(pid: int, epoch: int, seq: int, *kvs: tuple[bytes, bytes], base: int = 0) -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    for key, value in kvs:
        builder.append(TS, key, value)
    return at(base, builder.build())


def plain(key: bytes, value: bytes, base: int = 0) -> bytes:
    builder = BatchBuilder(CompressionType.NONE)
    builder.append(TS, key, value)
    return at(base, builder.build())


def marker(pid: int, epoch: int, commit: bool, base: int = 0) -> bytes:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return at(base, build_end_txn_marker(EndTxnMarker(kind, 0), pid, epoch, TS))


def at(base: int, batch: bytes) -> bytes:
    data = bytearray(batch)
    data[0:8] = base.to_bytes(8, "big")
    return bytes(data)


def feed(meta: CleanedTxnMetadata, batch: bytes) -> bool:
    header = parse_header(batch)
    if header.is_control:
        return meta.on_marker(header, parse_end_txn_marker(batch))
    return meta.on_data_batch(header)


# --- the pure decisions -------------------------------------------------------------------------


def test_aborted_data_goes_and_markers_stay_while_their_data_is_there() -> None:
    aborted = AbortedTxn(5, 0, 3, 1)
    meta = CleanedTxnMetadata([aborted])
    assert feed(meta, txn(5, 0, 0, (b"a", b"x"), base=0))
    assert not feed(meta, txn(6, 0, 0, (b"b", b"y"), base=1))
    assert not feed(meta, plain(b"c", b"z", base=2))
    assert not feed(meta, marker(5, 1, commit=False, base=3))  # data seen: kept, indexed
    assert not feed(meta, marker(6, 1, commit=True, base=4))  # its data is kept
    assert not feed(meta, txn(5, 1, 0, (b"d", b"w"), base=5))  # the next one is committed
    assert meta.cleaned_index == [aborted]

    again = CleanedTxnMetadata([aborted])  # the next pass: no data of either is left
    assert feed(again, marker(5, 1, commit=False, base=3))
    assert feed(again, marker(6, 1, commit=True, base=4))
    assert again.cleaned_index == []


def test_a_marker_goes_only_after_its_delete_horizon() -> None:
    batch = marker(5, 1, commit=False, base=3)
    now = TS
    kept = filter_batch(batch, OffsetMap(1 << 16), {}, now, 1000, discard=False)
    assert kept.data == batch
    stamped = filter_batch(batch, OffsetMap(1 << 16), {}, now, 1000, discard=True)
    assert stamped.data and stamped.tombstone_horizon_ms == now + 1000  # first pass
    waiting = filter_batch(stamped.data, OffsetMap(1 << 16), {}, now + 999, 1000, discard=True)
    assert waiting.data == stamped.data
    gone = filter_batch(stamped.data, OffsetMap(1 << 16), {}, now + 1000, 1000, discard=True)
    assert gone.data == b""
    last = filter_batch(stamped.data, OffsetMap(1 << 16), {5: 3}, now + 1000, 1000, True)
    assert last.data == stamped.data  # a producer's last batch stays whole
    data = txn(5, 0, 0, (b"a", b"x"), base=0)
    assert filter_batch(data, OffsetMap(1 << 16), {}, now, 1000, discard=True).data == b""


# --- a cleaning pass on a real log --------------------------------------------------------------


class Txnlog:
    def __init__(self, path: Path, clock: ManualClock) -> None:
        cfg = compact_config(delete_retention_ms=1000, segment_bytes=100_000)
        self.log: PartitionLog = open_compacted(path, clock, cfg)
        self.state = ProducerStateManager(self.log, clock)

    def put(self, batch: bytes) -> int:
        origin = AppendOrigin.COORDINATOR if parse_header(batch).is_control else AppendOrigin.CLIENT
        check = self.state.check_leader_append(batch)
        info = self.log.append_as_leader(batch, 0, origin)
        self.state.on_leader_append(check, info)
        self.log.high_watermark = self.log.log_end_offset
        return info.first_offset


def control_offsets(log: PartitionLog) -> list[int]:
    return [h.base_offset for h in iter_batches(read_bytes(log, 0)) if h.is_control]


def test_cleaning_removes_aborted_data_then_its_marker(tmp_path: Path) -> None:
    clock = ManualClock(TS)
    t = Txnlog(tmp_path, clock)
    t.put(plain(b"k1", b"v0"))  # 0
    t.put(txn(5, 0, 0, (b"k1", b"aborted"), (b"k2", b"aborted")))  # 1-2
    t.put(txn(6, 0, 0, (b"k3", b"c")))  # 3
    t.put(marker(5, 1, commit=False))  # 4
    t.put(marker(6, 1, commit=True))  # 5
    t.put(txn(5, 1, 0, (b"k4", b"later")))  # 6
    t.put(marker(5, 2, commit=True))  # 7
    t.log.roll()
    t.put(plain(b"k9", b"active"))  # 8
    assert t.log.collect_aborted_txns(0, 9) == [AbortedTxn(5, 1, 4, 3)]

    assert clean(t.log, clock, force=True) is not None
    assert [(r.offset, r.value) for r in records(t.log)] == [
        (0, b"v0"),  # not hidden by the aborted k1
        (3, b"c"),
        (6, b"later"),
        (8, b"active"),
    ]
    assert control_offsets(t.log) == [4, 5, 7]
    assert t.log.collect_aborted_txns(0, 9) == [AbortedTxn(5, 1, 4, 3)]  # still indexed

    assert clean(t.log, clock, force=True) is not None  # no aborted data left: stamped
    assert control_offsets(t.log) == [4, 5, 7]
    assert t.log.collect_aborted_txns(0, 9) == []
    clock.advance(1000)
    assert clean(t.log, clock, force=True) is not None  # past the horizon: gone
    assert control_offsets(t.log) == [5, 7]  # 7 is producer 5's last batch; 5 has data

    # The producer state rebuilt from the cleaned log: nothing open, the LSO is the end.
    t.log.close()
    t.log = PartitionLog.open(t.log.dir, t.log.tp, t.log.config, clock)
    t.log.update_high_watermark(9)
    state = ProducerStateManager(t.log, clock)
    assert state.ongoing_txns == {} and state.last_stable_offset(9) == 9


def test_cleaning_never_reaches_an_open_transaction(tmp_path: Path) -> None:
    clock = ManualClock(TS)
    t = Txnlog(tmp_path, clock)
    t.put(plain(b"k1", b"v0"))  # 0
    t.put(plain(b"k1", b"v1"))  # 1
    t.log.roll()
    t.put(txn(7, 0, 0, (b"k1", b"open")))  # 2, open
    t.log.roll()
    t.put(plain(b"k1", b"v3"))  # 3
    t.log.roll()
    t.put(plain(b"k9", b"x"))  # 4
    stats = clean(t.log, clock, force=True)
    assert stats is not None and stats.end_offset <= 2
    assert [(r.offset, r.value) for r in records(t.log)][:3] == [
        (1, b"v1"),
        (2, b"open"),
        (3, b"v3"),
    ]
