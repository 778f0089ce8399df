"""`riverlog dump-log` on a remote segment's objects, downloaded through the store's own reads
(as from S3, side by side in one folder, named by segment id): the `.log`, `.index`,
`.timeindex` and `.txnindex` dump as the local files they were copied from, the producer
snapshot shows the producers as of the segment's end and the leader-epoch checkpoint the
epochs covering it; once in-process and once through the real command in a subprocess. The
segment is built with the storage code itself (a leader's log with its producer state, an
aborted transaction and a new leader epoch, copied by the remote log manager): no cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from storage_log_testkit import TP, TS, open_log
from tiered_testkit import manager, tiered

from riverlog.common.clock import ManualClock
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker
from riverlog.common.records.header import parse_header
from riverlog.services.storage.dump import dump_segment
from riverlog.services.storage.log import AppendOrigin, PartitionLog
from riverlog.services.storage.log.txn_index import AbortedTxn
from riverlog.services.storage.producer.manager import ProducerStateManager
from riverlog.services.storage.remote.remote_log_manager import PartitionTask
from riverlog.services.storage.remote.segment_metadata import RemoteLogSegmentMetadata
from riverlog.services.storage.remote.storage import (
    SEGMENT_SUFFIX,
    IndexType,
    RemoteStorageManager,
)

pytestmark = pytest.mark.timeout(60)

IDEMPOTENT, TRANSACTIONAL = 41, 42
SUFFIXES = [SEGMENT_SUFFIX, *(t.value for t in IndexType)]


def batch(pid: int, seq: int, txn: bool = False) -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=txn,
    )
    builder.append(TS + seq, b"k", b"v" * 30)
    return builder.build()


def abort(pid: int) -> bytes:
    return build_end_txn_marker(EndTxnMarker(ControlRecordType.ABORT, 5), pid, 0, TS + 50)


def append(plog: PartitionLog, state: ProducerStateManager, payload: bytes, epoch: int) -> None:
    """As the leader of `epoch` (a single replica: the high watermark follows the log end)."""
    control = parse_header(payload, 0).is_control
    check = state.check_leader_append(payload)
    origin = AppendOrigin.COORDINATOR if control else AppendOrigin.CLIENT
    state.on_leader_append(check, plog.append_as_leader(payload, epoch, origin))
    plog.high_watermark = plog.log_end_offset


async def download(
    store: RemoteStorageManager, segment: RemoteLogSegmentMetadata, into: Path
) -> dict[str, Path]:
    """Every object of the segment, read through the store and written as `<id><suffix>`."""
    into.mkdir(exist_ok=True)
    out: dict[str, Path] = {}
    for suffix in SUFFIXES:
        path = into / f"{segment.segment_id.id}{suffix}"
        if suffix == SEGMENT_SUFFIX:
            path.write_bytes(await store.fetch_log_segment(segment.segment_id, 0))
        else:
            path.write_bytes(await store.fetch_index(segment.segment_id, IndexType(suffix)))
        out[suffix] = path
    return out


async def test_a_downloaded_remote_segment_dumps_every_object(
    tmp_path: Path, clock: ManualClock
) -> None:
    plog = open_log(tmp_path / "data", clock, tiered(**{"index.interval.bytes": 0}))
    state = ProducerStateManager(plog, clock)
    plog.leader_epoch_cache.assign(0, 0)
    append(plog, state, batch(IDEMPOTENT, 0), 0)  # 0
    append(plog, state, batch(TRANSACTIONAL, 0, txn=True), 0)  # 1: opens a transaction
    plog.roll()
    plog.leader_epoch_cache.assign(2, plog.log_end_offset)
    append(plog, state, batch(IDEMPOTENT, 1), 2)  # 2: a new leader epoch
    append(plog, state, abort(TRANSACTIONAL), 2)  # 3: the abort's marker
    plog.roll()  # the segment [2, 3] is closed; its producer snapshot is taken at 4
    for seq in range(2, 6):
        append(plog, state, batch(IDEMPOTENT, seq), 2)
    local = plog.segments[1]
    assert (local.base_offset, plog.segments[2].base_offset) == (2, 4)
    assert local.txn_index.entries == (AbortedTxn(TRANSACTIONAL, 1, 3, 4),)
    originals = {
        SEGMENT_SUFFIX: local.log.path,
        IndexType.OFFSET.value: local.offset_index.path,
        IndexType.TIMESTAMP.value: local.time_index.path,
        IndexType.TRANSACTION.value: local.txn_index.path,
    }
    expected = {s: list(dump_segment(p, records=True))[1:] for s, p in originals.items()}
    # index.interval.bytes=0: an entry for every batch but the first, absolute offsets
    assert expected[IndexType.OFFSET.value] == [f"offset: 3 position: {len(batch(41, 1))}"]

    rlm = manager(tmp_path / "tier", clock)
    await rlm.run_once(PartitionTask(plog, 2))
    meta = rlm.metadata.state(TP)
    assert meta is not None
    remote = meta.segment_for(local.base_offset)
    assert remote is not None and remote.start_offset == local.base_offset
    files = await download(rlm.store, remote, tmp_path / "downloaded")

    dumped = {s: list(dump_segment(p, records=True)) for s, p in files.items()}
    for suffix, lines in expected.items():
        assert dumped[suffix][1:] == lines, suffix
    assert dumped[IndexType.TRANSACTION.value][1:] == [
        f"version: 0 producerId: {TRANSACTIONAL} firstOffset: 1 lastOffset: 3 lastStableOffset: 4"
    ]
    # The producers as of the segment's end (offset 4): the idempotent one's two batches; the
    # transactional one's transaction ended by the abort (its coordinator's epoch kept, the
    # marker remembered as a batch without sequence numbers).
    assert dumped[IndexType.PRODUCER_SNAPSHOT.value][1:] == [
        f"producerId: {IDEMPOTENT} producerEpoch: 0 coordinatorEpoch: -1 "
        f"currentTxnFirstOffset: -1 lastTimestamp: {TS + 1}",
        f"| firstSequence: 0 lastSequence: 0 firstOffset: 0 lastOffset: 0 timestamp: {TS}",
        f"| firstSequence: 1 lastSequence: 1 firstOffset: 2 lastOffset: 2 timestamp: {TS + 1}",
        f"producerId: {TRANSACTIONAL} producerEpoch: 0 coordinatorEpoch: 5 "
        f"currentTxnFirstOffset: -1 lastTimestamp: {TS + 50}",
        f"| firstSequence: 0 lastSequence: 0 firstOffset: 1 lastOffset: 1 timestamp: {TS}",
        f"| firstSequence: -1 lastSequence: -1 firstOffset: 3 lastOffset: 3 timestamp: {TS + 50}",
    ]
    assert dumped[IndexType.LEADER_EPOCH.value][1:] == ["epoch: 2 startOffset: 2"]

    # The same through the real command, all six files in one run.
    paths = [str(files[s]) for s in SUFFIXES]
    done = subprocess.run(
        [sys.executable, "-m", "riverlog.cli.main", "dump-log", *paths, "--print-records"],
        capture_output=True,
        text=True,
        timeout=50,
        env={k: v for k, v in os.environ.items() if not k.startswith("RIVERLOG_")},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [line for s in SUFFIXES for line in dumped[s]]
