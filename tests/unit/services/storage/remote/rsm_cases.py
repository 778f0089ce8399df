"""What every RemoteStorageManager must do, as coroutines taking the store: run by the
directory store's unit tests and against a real S3 server by tests/integration/tiered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from riverlog.common.types import TopicPartition
from riverlog.services.storage.remote.storage import (
    IndexType,
    LogSegmentData,
    RemoteLogSegmentId,
    RemoteResourceNotFoundError,
    RemoteStorageManager,
)

TP = TopicPartition("orders", 3)


def segment_files(dir: Path, base: int = 0, size: int = 10_000, txn: bool = True) -> LogSegmentData:
    """Files of a fake closed segment with random contents (the store copies bytes, it does not
    parse them)."""
    dir.mkdir(parents=True, exist_ok=True)
    name = f"{base:020d}"
    files = {}
    for suffix, n in ((".log", size), (".index", 80), (".timeindex", 120), (".txnindex", 34)):
        path = dir / (name + suffix)
        path.write_bytes(os.urandom(n))
        files[suffix] = path
    snapshot = dir / f"{base + 100:020d}.snapshot"
    snapshot.write_bytes(os.urandom(50))
    return LogSegmentData(
        log_segment=files[".log"],
        offset_index=files[".index"],
        time_index=files[".timeindex"],
        transaction_index=files[".txnindex"] if txn else None,
        producer_snapshot=snapshot,
        leader_epoch_index=b"0\n1\n0 0\n",
    )


async def copy_then_fetch_ranges_and_indexes(store: RemoteStorageManager, tmp: Path) -> None:
    data = segment_files(tmp)
    seg = RemoteLogSegmentId.generate(TP)
    await store.copy_log_segment_data(seg, data)
    log = data.log_segment.read_bytes()
    assert await store.fetch_log_segment(seg, 0) == log
    assert await store.fetch_log_segment(seg, 100, 4196) == log[100:4196]
    assert await store.fetch_log_segment(seg, 9_000) == log[9_000:]
    assert await store.fetch_log_segment(seg, 9_990, 20_000) == log[9_990:]
    assert await store.fetch_log_segment(seg, 500, 500) == b""
    assert await store.fetch_log_segment(seg, len(log)) == b""
    assert await store.fetch_index(seg, IndexType.OFFSET) == data.offset_index.read_bytes()
    assert await store.fetch_index(seg, IndexType.TIMESTAMP) == data.time_index.read_bytes()
    assert data.transaction_index is not None and data.producer_snapshot is not None
    assert (
        await store.fetch_index(seg, IndexType.TRANSACTION) == data.transaction_index.read_bytes()
    )
    snapshot = await store.fetch_index(seg, IndexType.PRODUCER_SNAPSHOT)
    assert snapshot == data.producer_snapshot.read_bytes()
    assert await store.fetch_index(seg, IndexType.LEADER_EPOCH) == b"0\n1\n0 0\n"


async def two_copies_of_one_segment_are_apart(store: RemoteStorageManager, tmp: Path) -> None:
    """A retried copy gets a new id: deleting the first copy leaves the second whole."""
    first, second = RemoteLogSegmentId.generate(TP), RemoteLogSegmentId.generate(TP)
    a, b = segment_files(tmp / "a"), segment_files(tmp / "b")
    await store.copy_log_segment_data(first, a)
    await store.copy_log_segment_data(second, b)
    await store.delete_log_segment_data(first)
    assert await store.fetch_log_segment(second, 0) == b.log_segment.read_bytes()
    with pytest.raises(RemoteResourceNotFoundError):
        await store.fetch_log_segment(first, 0)


async def delete_removes_everything_and_is_idempotent(
    store: RemoteStorageManager, tmp: Path
) -> None:
    seg = RemoteLogSegmentId.generate(TP)
    await store.copy_log_segment_data(seg, segment_files(tmp, txn=False))
    with pytest.raises(RemoteResourceNotFoundError):
        await store.fetch_index(seg, IndexType.TRANSACTION)  # none was copied
    await store.delete_log_segment_data(seg)
    await store.delete_log_segment_data(seg)  # a retried delete is no error
    for index_type in IndexType:
        with pytest.raises(RemoteResourceNotFoundError):
            await store.fetch_index(seg, index_type)
    with pytest.raises(RemoteResourceNotFoundError, match=str(seg)):
        await store.fetch_log_segment(seg, 0, 10)


async def a_bad_range_is_refused(store: RemoteStorageManager, tmp: Path) -> None:
    seg = RemoteLogSegmentId.generate(TP)
    await store.copy_log_segment_data(seg, segment_files(tmp))
    with pytest.raises(ValueError):
        await store.fetch_log_segment(seg, 10, 5)
    with pytest.raises(ValueError):
        await store.fetch_log_segment(seg, -1)


async def put_if_absent_creates_once(store: RemoteStorageManager, tmp: Path) -> None:
    """The metadata log's fencing primitive: the second create of a name fails and the
    first one's bytes stay; removing incomplete writes leaves whole objects."""
    assert await store.put_if_absent("orders-3/metadata/00000000000000000000.json", b"first")
    assert not await store.put_if_absent("orders-3/metadata/00000000000000000000.json", b"x")
    assert await store.put_if_absent("orders-3/metadata/00000000000000000001.json", b"second")
    assert await store.get_object("orders-3/metadata/00000000000000000000.json") == b"first"
    assert await store.get_object("orders-3/metadata/00000000000000000009.json") is None
    assert await store.list_objects("orders-3/metadata/") == [
        "orders-3/metadata/00000000000000000000.json",
        "orders-3/metadata/00000000000000000001.json",
    ]
    assert await store.list_objects("orders-4/") == []
    # Whole objects are never "incomplete" (only what a killed write left, none here).
    assert await store.delete_incomplete_objects("orders-3/metadata/") == 0
    assert len(await store.list_objects("orders-3/metadata/")) == 2
    await store.delete_objects(await store.list_objects("orders-3/metadata/"))
    await store.delete_objects(["orders-3/metadata/00000000000000000000.json"])
    assert await store.list_objects("orders-3/metadata/") == []


CASES = [
    put_if_absent_creates_once,
    copy_then_fetch_ranges_and_indexes,
    two_copies_of_one_segment_are_apart,
    delete_removes_everything_and_is_idempotent,
    a_bad_range_is_refused,
]
