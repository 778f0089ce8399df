"""The read_committed consumer's chunk: records of aborted transactions are dropped (the
fetch's aborted_transactions through the shared AbortedFilter), markers never show, and the
position stops at the last stable offset."""

from __future__ import annotations

from riverlog.client.consumer.chunk import Chunk
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker
from riverlog.common.records.header import set_base_offset
from riverlog.common.types import TopicPartition

TP = TopicPartition("t", 0)


def batch(offset: int, pid: int, values: list[bytes], transactional: bool = True) -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=transactional,
    )
    for value in values:
        builder.append(1_700_000_000_000, None, value)
    data = bytearray(builder.build())
    set_base_offset(data, 0, offset)
    return bytes(data)


def marker(offset: int, pid: int, kind: ControlRecordType) -> bytes:
    data = bytearray(build_end_txn_marker(EndTxnMarker(kind, 0), pid, 1, 1_700_000_000_000))
    set_base_offset(data, 0, offset)
    return bytes(data)


# offsets: 0-1 pid 7 (aborted), 2-3 pid 8 (committed), 4 abort marker of 7, 5 commit marker of
# 8, 6 pid 9 (still open: the last stable offset is 6), 7 non-transactional
LOG = b"".join(
    [
        batch(0, 7, [b"a0", b"a1"]),
        batch(2, 8, [b"c0", b"c1"]),
        marker(4, 7, ControlRecordType.ABORT),
        marker(5, 8, ControlRecordType.COMMIT),
        batch(6, 9, [b"open"]),
        batch(7, -1, [b"plain"], transactional=False),
    ]
)


def values(chunk: Chunk, position: int) -> list[bytes]:
    return [r.value for r in chunk.decode(position, check_crcs=True)]


def test_read_committed_drops_aborted_records_and_stops_at_the_lso() -> None:
    chunk = Chunk(TP, 0, 0, 1 << 20)
    assert chunk.answer(LOG, stable_end=6, aborted=[(7, 0)])
    assert chunk.next_offset == 6  # the open transaction and what follows wait
    assert values(chunk, 0) == [b"c0", b"c1"]


def test_read_uncommitted_reads_everything_but_markers() -> None:
    chunk = Chunk(TP, 0, 0, 1 << 20)
    assert chunk.answer(LOG)
    assert chunk.next_offset == 8
    assert values(chunk, 0) == [b"a0", b"a1", b"c0", b"c1", b"open", b"plain"]


def test_nothing_below_the_lso_is_no_answer() -> None:
    """At the LSO the answer holds nothing stable: the position stays there (the fetcher then
    waits as at the end of the log)."""
    assert not Chunk(TP, 0, 6, 1 << 20).answer(LOG, stable_end=6)
    tail = batch(6, 9, [b"open"]) + batch(7, -1, [b"plain"], transactional=False)
    assert not Chunk(TP, 0, 6, 1 << 20).answer(tail, stable_end=6)
    assert Chunk(TP, 0, 6, 1 << 20).answer(tail, stable_end=8)  # once it is committed


def test_a_range_of_the_received_message_reads_as_its_bytes() -> None:
    """The consumer keeps a partition's records as a range of the whole fetch answer: the
    stable cut and the decode stay within it (bytes around it are other fields of the message)."""
    message = b"\x0a\x20" + LOG + batch(8, -1, [b"next partition"], transactional=False)
    start, end = 2, 2 + len(LOG)
    chunk = Chunk(TP, 0, 0, 1 << 20)
    assert chunk.answer(message, stable_end=6, aborted=[(7, 0)], start=start, end=end)
    assert chunk.next_offset == 6
    assert values(chunk, 0) == [b"c0", b"c1"]
    chunk = Chunk(TP, 0, 0, 1 << 20)
    assert chunk.answer(message, start=start, end=end)
    assert chunk.next_offset == 8  # not the batch at 8 past `end`
    assert values(chunk, 0) == [b"a0", b"a1", b"c0", b"c1", b"open", b"plain"]
    assert not Chunk(TP, 0, 6, 1 << 20).answer(message, stable_end=6, start=start, end=end)
