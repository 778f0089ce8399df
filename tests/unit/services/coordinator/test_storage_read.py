"""Loading reads a compacted `__consumer_offsets` log (decision 0014): batches rewritten by the
log cleaner keep their base and last offsets but lose records (gaps inside and between
batches), a producer's last batch may be an empty header, tombstones stay for a while. The
reader must yield every record left below the high watermark once, in order, and never stall
or re-read a batch whose tail is gone."""

from __future__ import annotations

import struct
from typing import Any

from riverlog.common.cluster import ClusterImage, NodeInfo
from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder
from riverlog.common.records.header import parse_header
from riverlog.common.records.rewrite import decode_raw, empty_batch, rebuild_batch
from riverlog.services.coordinator.peers.storage import StorageClient, records_below
from riverlog.v1 import data_pb2

Rows = list[tuple[bytes, bytes | None]]


def batch(base: int, rows: Rows) -> bytes:
    builder = BatchBuilder(producer_id=(1 << 62), producer_epoch=1, base_sequence=base)
    for key, value in rows:
        builder.append(0, key, value)
    built = builder.build()
    return struct.pack(">q", base) + built[8:]  # the base offset the leader assigns


def cleaned(data: bytes, keep: list[int]) -> bytes:
    """What the log cleaner writes of a batch keeping the records at indexes `keep`."""
    raw = decode_raw(data)
    return rebuild_batch(raw, keep) if keep else empty_batch(raw.header)


def rows(prefix: str, n: int, tombstone_at: int = -1) -> Rows:
    return [
        (f"{prefix}{i}".encode(), None if i == tombstone_at else f"v{i}".encode()) for i in range(n)
    ]


# offsets 0-4, 5-9, 10-14, 15-19: the cleaner removed records at the ends of batches,
# a whole batch (an empty header remains) and the start of another; 17 is a tombstone.
LOG = [
    cleaned(batch(0, rows("a", 5)), [0, 2]),  # 0, 2 (3, 4 gone: the batch ends at 4)
    cleaned(batch(5, rows("b", 5)), []),  # nothing left: header only, ends at 9
    cleaned(batch(10, rows("c", 5)), [3, 4]),  # 13, 14
    batch(15, rows("d", 5, tombstone_at=2)),  # 15-19, untouched (above the cleaned part)
]
HIGH_WATERMARK = 20


def test_records_below_resumes_after_the_last_batch_not_the_last_record() -> None:
    found, nxt = records_below(LOG[0], 0, HIGH_WATERMARK)
    assert [r.offset for r in found] == [0, 2]
    assert nxt == 5  # not 3: offsets 3 and 4 are gone, fetching 3 would return this batch again
    found, nxt = records_below(LOG[1], 5, HIGH_WATERMARK)
    assert (found, nxt) == ([], 10)
    found, nxt = records_below(b"".join(LOG), 1, 16)
    assert [r.offset for r in found] == [2, 13, 14, 15]  # stops at the end given
    assert nxt == 20


class FakeLeader:
    """The storage node's Fetch over LOG: whole batches whose last offset is at or after the
    fetch offset, at most `per_fetch` of them per response."""

    def __init__(self, per_fetch: int) -> None:
        self.per_fetch = per_fetch
        self.fetched_from: list[int] = []

    async def Fetch(self, request: data_pb2.FetchRequest, timeout: float) -> Any:
        position = request.partitions[0].fetch_offset
        self.fetched_from.append(position)
        chosen = [b for b in LOG if _last_offset(b) >= position][: self.per_fetch]
        part = data_pb2.FetchPartitionResponse(
            error_code=ErrorCode.NONE,
            high_watermark=HIGH_WATERMARK,
            log_start_offset=0,
            records=b"".join(chosen),
        )
        return data_pb2.FetchResponse(partitions=[part])


def _last_offset(data: bytes) -> int:
    header = parse_header(data)
    return header.base_offset + header.last_offset_delta


class Client(StorageClient):
    def __init__(self, leader: FakeLeader) -> None:
        super().__init__(ClusterImage.empty)
        self.leader = leader

    def _leader(self, partition: int) -> Any:
        return NodeInfo("storage", 1, "127.0.0.1", 1)

    def _stub(self, node: Any) -> Any:
        return self.leader


async def test_read_yields_each_remaining_record_once_across_gaps_and_empty_batches() -> None:
    fetches = {1: [0, 5, 10, 15], 2: [0, 10], 4: [0]}  # each batch fetched once
    for per_fetch, expected in fetches.items():
        leader = FakeLeader(per_fetch)
        records = [r async for r in Client(leader).read(0)]
        assert [r.offset for r in records] == [0, 2, 13, 14, 15, 16, 17, 18, 19]
        assert [r.key for r in records][:2] == [b"a0", b"a2"]
        assert records[6].value is None  # the tombstone is replayed as one
        assert leader.fetched_from == expected


def test_records_below_tells_transactional_records_and_markers() -> None:
    """Loading needs each record's batch (decision 0031): a transactional batch's producer and
    last sequence, and a marker's producer, epoch and result, with no key or value."""
    from riverlog.common.records.control import (
        ControlRecordType,
        EndTxnMarker,
        build_end_txn_marker,
    )

    txn = BatchBuilder(producer_id=77, producer_epoch=3, base_sequence=4, is_transactional=True)
    txn.append(0, b"k1", b"v1")
    txn.append(0, b"k2", b"v2")
    data = struct.pack(">q", 0) + txn.build()[8:]
    marker = build_end_txn_marker(EndTxnMarker(ControlRecordType.ABORT, 9), 77, 4, 0)
    data += struct.pack(">q", 2) + marker[8:]
    data += batch(3, rows("p", 1))
    found, nxt = records_below(data, 0, 10)
    assert nxt == 4
    assert [(r.offset, r.key, r.producer_id, r.last_sequence, r.transactional) for r in found] == [
        (0, b"k1", 77, 5, True),
        (1, b"k2", 77, 5, True),
        (2, None, 77, -1, True),
        (3, b"p0", 1 << 62, 3, False),
    ]
    assert [r.marker for r in found] == [None, None, False, None]
    assert found[2].producer_epoch == 4
