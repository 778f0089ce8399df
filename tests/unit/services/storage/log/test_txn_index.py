"""The .txnindex file: Kafka's 34-byte entries, a torn tail dropped, truncation by marker
offset, the search that stops once an entry's last stable offset reaches the bound, and the
file going with its segment (deleted, truncated, carried through a swap)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from riverlog.services.storage.dump import dump_segment
from riverlog.services.storage.log.txn_index import (
    ENTRY_SIZE,
    AbortedTxn,
    CorruptTxnIndexError,
    TransactionIndex,
    decode_entries,
    search,
)

pytestmark = pytest.mark.timeout(30)


def test_an_entry_is_kafkas_34_bytes() -> None:
    entry = AbortedTxn(producer_id=7, first_offset=10, last_offset=20, last_stable_offset=15)
    data = entry.encode()
    assert ENTRY_SIZE == len(data) == 34
    assert struct.unpack(">hqqqq", data) == (0, 7, 10, 20, 15)
    assert decode_entries(data + data[:5]) == [entry]  # a torn tail is not an entry
    with pytest.raises(CorruptTxnIndexError):
        decode_entries(b"\x00\x01" + data[2:])


def test_the_file_is_created_on_the_first_entry_and_survives_reopening(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TransactionIndex(path)
    assert not path.exists() and index.entries == ()
    a, b = AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)
    assert index.append(a) and index.append(b)
    assert not index.append(AbortedTxn(3, 4, 9, 10))  # not after the last marker: indexed
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00")  # a crash mid-append
    reopened = TransactionIndex(path)
    assert reopened.entries == (a, b)
    assert path.stat().st_size == 2 * ENTRY_SIZE
    reopened.truncate_to(9)  # drops the entries whose marker is at or after 9
    assert TransactionIndex(path).entries == (a,)
    reopened.truncate_to(5)
    assert not path.exists()


def test_the_search_keeps_overlapping_entries_and_stops_at_the_bound() -> None:
    entries = [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 8, 9), AbortedTxn(3, 9, 12, 13)]
    found = search(entries, 5, 9)
    assert found.aborted == [entries[1]] and found.complete  # lso 9 >= 9: no later one
    found = search(entries, 0, 20)
    assert found.aborted == entries and not found.complete
    assert search(entries, 13, 20).aborted == []


def test_dump_shows_the_entries_as_kafka(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    TransactionIndex(path).append(AbortedTxn(7, 10, 20, 15))
    assert list(dump_segment(path))[1:] == [
        "version: 0 producerId: 7 firstOffset: 10 lastOffset: 20 lastStableOffset: 15"
    ]
