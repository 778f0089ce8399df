"""dump_segment: DumpLogSegments-style lines for .log, .index and .timeindex files, producer
snapshots and the leader-epoch checkpoint, each read by the storage code's own reader."""

from __future__ import annotations

from pathlib import Path

import pytest
from storage_log_testkit import TS, config, crash, fill, make_batch, open_log

from riverlog.common.clock import ManualClock
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.services.storage.dump import dump_segment
from riverlog.services.storage.log.leader_epoch_cache import LeaderEpochFileCache
from riverlog.services.storage.producer.entry import BatchMetadata, ProducerStateEntry
from riverlog.services.storage.producer.snapshot import write_snapshot


def test_dump_log_batches_and_records(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    log.append_as_leader(make_batch(2, ts=TS), leader_epoch=4)
    builder = BatchBuilder(CompressionType.GZIP)
    builder.append(TS + 5, None, b"hello", [("trace", b"1"), ("id", None)])
    log.append_as_leader(builder.build(), leader_epoch=4)
    path = log.active_segment.log.path
    log.close()
    lines = list(dump_segment(path))
    assert lines[0] == f"Dumping {path}"
    assert lines[1] == "Log starting offset: 0"
    assert lines[2].startswith("baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1")
    assert "partitionLeaderEpoch: 4" in lines[2]
    assert f"position: 0 CreateTime: {TS + 1} " in lines[2]
    assert "compresscodec: none" in lines[2] and lines[2].endswith("isvalid: true")
    assert "baseOffset: 2 lastOffset: 2 count: 1" in lines[3]
    assert "compresscodec: gzip" in lines[3]
    assert len(lines) == 4
    records = list(dump_segment(path, records=True))
    assert records[3] == (
        f"| offset: 0 CreateTime: {TS} keySize: 12 valueSize: 20 headerKeys: [] "
        "key: k00000-00000 payload: AAAAAAAAAAAAAAAAAAAA"
    )
    assert records[-1] == (
        f"| offset: 2 CreateTime: {TS + 5} keySize: -1 valueSize: 5 headerKeys: [trace, id] "
        "key: null payload: hello"
    )


def test_dump_log_reports_invalid_batches_and_torn_tail(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock)
    fill(log, 3)
    path = log.active_segment.log.path
    log.close()
    data = bytearray(path.read_bytes())
    size = len(data) // 3
    data[size + 70] ^= 0xFF  # the second batch's CRC no longer holds
    path.write_bytes(bytes(data[:-10]))  # and the third is torn
    lines = list(dump_segment(path, records=True))
    assert lines[2].endswith("isvalid: true")
    assert lines[3].startswith("| offset: 0")
    assert lines[4].startswith("baseOffset: 1") and lines[4].endswith("isvalid: false")
    assert lines[5] == (
        f"Found {size - 10} invalid bytes at position {2 * size}: a torn batch "
        f"({size} bytes declared, {size - 10} left)"
    )


def test_dump_indexes(tmp_path: Path, clock: ManualClock) -> None:
    log = open_log(tmp_path, clock, config(index_interval_bytes=0))
    fill(log, 4, count=2, clock=clock, advance_ms=10)
    segment = log.active_segment
    size = segment.size // 4
    crash(log)  # the index files are still preallocated: the dump stops at the zeros
    index_lines = list(dump_segment(segment.offset_index.path))[1:]
    assert index_lines == [f"offset: {2 * i + 1} position: {i * size}" for i in (1, 2, 3)]
    time_lines = list(dump_segment(segment.time_index.path))[1:]
    assert time_lines == [f"timestamp: {TS + 10 * i + 1} offset: {2 * i + 1}" for i in (1, 2, 3)]


def test_dump_producer_snapshot_and_epoch_checkpoint(tmp_path: Path) -> None:
    idle = ProducerStateEntry(7, 2)
    idle.coordinator_epoch, idle.last_timestamp = 4, TS
    idle.batches.append(BatchMetadata(0, 4, 10, 14, TS))
    idle.batches.append(BatchMetadata(5, 5, 20, 20, TS + 3))
    open_txn = ProducerStateEntry(9, 0)
    open_txn.current_txn_first_offset, open_txn.last_timestamp = 21, TS + 9
    open_txn.batches.append(BatchMetadata(0, 1, 21, 22, TS + 9))
    path = write_snapshot(tmp_path, 23, [idle, open_txn])
    assert list(dump_segment(path)) == [
        f"Dumping {path}",
        "Producer state as of offset: 23",
        "producerId: 7 producerEpoch: 2 coordinatorEpoch: 4 currentTxnFirstOffset: -1 "
        f"lastTimestamp: {TS}",
        f"| firstSequence: 0 lastSequence: 4 firstOffset: 10 lastOffset: 14 timestamp: {TS}",
        f"| firstSequence: 5 lastSequence: 5 firstOffset: 20 lastOffset: 20 timestamp: {TS + 3}",
        "producerId: 9 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: 21 "
        f"lastTimestamp: {TS + 9}",
        f"| firstSequence: 0 lastSequence: 1 firstOffset: 21 lastOffset: 22 timestamp: {TS + 9}",
    ]
    path.write_bytes(path.read_bytes()[:-3])
    assert list(dump_segment(path))[2:] == ["Found an invalid producer snapshot: CRC mismatch"]

    cache = LeaderEpochFileCache.in_dir(tmp_path)
    cache.assign(0, 0)
    cache.assign(3, 120)
    checkpoint = tmp_path / "leader-epoch-checkpoint"
    assert list(dump_segment(checkpoint))[1:] == [
        "epoch: 0 startOffset: 0",
        "epoch: 3 startOffset: 120",
    ]
    checkpoint.write_text("0\n2\n0 0\n")
    assert list(dump_segment(checkpoint))[1:] == [
        f"Found an invalid leader-epoch checkpoint: checkpoint file {checkpoint}: "
        "expected 2 entries, found 1"
    ]


def test_dump_rejects_other_files(tmp_path: Path) -> None:
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(ValueError, match=r"not a \.log"):
        list(dump_segment(tmp_path / "x.txt"))
    (tmp_path / "abc.log").write_bytes(b"")
    with pytest.raises(ValueError, match="20-digit"):
        list(dump_segment(tmp_path / "abc.log"))
