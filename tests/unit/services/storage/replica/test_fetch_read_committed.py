"""read_committed at the leader: a fetch stops at the last stable offset and lists the aborted
transactions that meet its records (also in the zero-copy header), read_uncommitted still reads
to the high watermark, and ListOffsets latest under read_committed answers the LSO."""

from dataclasses import replace

import pytest
from storage_replica_testkit import NODE, Node, fetch_params, image, topic

from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker
from riverlog.common.records.header import iter_batches
from riverlog.common.types import IsolationLevel, OffsetSpec, TopicPartition
from riverlog.services.storage.log import AppendOrigin
from riverlog.services.storage.replica.fetch import close_results
from riverlog.services.storage.replica.requests import (
    Acks,
    DeleteRecordsPartitionData,
    ListOffsetsPartitionData,
    ProduceParams,
    ProducePartitionData,
)
from riverlog.services.storage.rpc.convert import fetch_partition_to_proto

pytestmark = pytest.mark.timeout(30)

T0 = TopicPartition("t", 0)
TS = 1_700_000_000_000
COMMITTED = IsolationLevel.READ_COMMITTED


@pytest.fixture(autouse=True)
def _topics(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", leaders=[NODE], epoch=1)))


def batch(pid: int = -1, count: int = 1, seq: int = -1, txn: bool = False) -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE,
        producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1,
        base_sequence=seq,
        is_transactional=txn,
    )
    for i in range(count):
        builder.append(TS, b"k%d" % i, b"v")
    return builder.build()


async def append(node: Node, payload: bytes, origin: AppendOrigin = AppendOrigin.CLIENT) -> int:
    params = ProduceParams(Acks.LEADER, 5_000, [ProducePartitionData(T0, payload)], origin=origin)
    [result] = await node.produce.produce(params)
    assert result.error == ErrorCode.NONE, result.error_message
    return result.base_offset


async def end_txn(node: Node, pid: int, commit: bool) -> int:
    kind = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    marker = build_end_txn_marker(EndTxnMarker(kind, 0), pid, 1, TS)
    return await append(node, marker, AppendOrigin.COORDINATOR)


async def fetch(node: Node, offset: int, isolation: IsolationLevel = COMMITTED):
    params = replace(fetch_params((T0, offset)), isolation=isolation)
    results = await node.fetch.fetch(params)
    try:
        [r] = results
        offsets = [h.base_offset for h in iter_batches(r.records.to_bytes())] if r.size else []
        return r, offsets
    finally:
        close_results(results)


def latest(node: Node, isolation: IsolationLevel) -> int:
    [r] = node.offsets.list_offsets(
        [ListOffsetsPartitionData(T0, OffsetSpec.LATEST, isolation=isolation)]
    )
    assert r.error == ErrorCode.NONE
    return r.offset


async def test_read_committed_stops_at_the_open_transaction(node: Node) -> None:
    await append(node, batch(count=2))  # 0-1
    await append(node, batch(5, 3, seq=0, txn=True))  # 2-4, open
    await append(node, batch())  # 5
    r, offsets = await fetch(node, 0)
    assert offsets == [0] and (r.last_stable_offset, r.high_watermark) == (2, 6)
    assert r.aborted_transactions == []
    r, offsets = await fetch(node, 0, IsolationLevel.READ_UNCOMMITTED)
    assert offsets == [0, 2, 5] and r.last_stable_offset == 2
    r, offsets = await fetch(node, 2)
    assert offsets == [] and r.error == ErrorCode.NONE
    assert latest(node, COMMITTED) == 2 and latest(node, IsolationLevel.READ_UNCOMMITTED) == 6
    await end_txn(node, 5, commit=True)  # 6
    r, offsets = await fetch(node, 0)
    assert offsets == [0, 2, 5, 6] and r.last_stable_offset == 7
    assert r.aborted_transactions == [] and latest(node, COMMITTED) == 7


async def test_aborted_transactions_meeting_the_records_are_listed(node: Node) -> None:
    await append(node, batch(5, 2, seq=0, txn=True))  # 0-1
    await append(node, batch(6, 1, seq=0, txn=True))  # 2
    await end_txn(node, 5, commit=False)  # 3
    await append(node, batch())  # 4
    await end_txn(node, 6, commit=False)  # 5
    await append(node, batch())  # 6
    r, offsets = await fetch(node, 0)
    assert offsets == [0, 2, 3, 4, 5, 6] and r.last_stable_offset == 7
    assert r.aborted_transactions == [(5, 0), (6, 2)]
    r, _ = await fetch(node, 4)
    assert r.aborted_transactions == [(6, 2)]  # its marker at 5 is in the records
    r, _ = await fetch(node, 6)
    assert r.aborted_transactions == []
    r, _ = await fetch(node, 0, IsolationLevel.READ_UNCOMMITTED)
    assert r.aborted_transactions == []  # only read_committed readers need them
    r, _ = await fetch(node, 0)
    msg = fetch_partition_to_proto(r, zero_copy=True)  # the zero-copy header carries them
    assert [(a.producer_id, a.first_offset) for a in msg.aborted_transactions] == [(5, 0), (6, 2)]
    assert msg.last_stable_offset == 7


async def test_delete_records_stops_at_an_open_transaction(node: Node) -> None:
    await append(node, batch(count=2))  # 0-1
    await append(node, batch(5, 1, seq=0, txn=True))  # 2, open
    await append(node, batch())  # 3
    [r] = node.offsets.delete_records([DeleteRecordsPartitionData(T0, 3)])
    assert r.error == ErrorCode.OFFSET_OUT_OF_RANGE and "open from offset 2" in r.error_message
    [r] = node.offsets.delete_records([DeleteRecordsPartitionData(T0, -1)])
    assert r.error == ErrorCode.NONE and r.low_watermark == 2  # -1: up to the open one
    await end_txn(node, 5, commit=False)  # 4
    [r] = node.offsets.delete_records([DeleteRecordsPartitionData(T0, -1)])
    assert r.low_watermark == 5
