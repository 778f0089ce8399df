"""The StorageService over a real loopback gRPC server: produce (unary and stream, acks 0/1/all),
fetch, list offsets, delete records and describe log dirs; per-partition error codes travel in
the response, whole-request errors as a status with the Riverlog code trailer."""

import asyncio

import grpc
import pytest
from storage_replica_testkit import Node, make_batch

from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder
from riverlog.common.rpc.status import from_rpc_error
from riverlog.common.types import TopicPartition
from riverlog.v1 import common_pb2, data_pb2, storage_pb2

T = "t"


def produce_request(*parts, acks=common_pb2.ACKS_LEADER, correlation_id=0, epoch=None):
    return data_pb2.ProduceRequest(
        acks=acks,
        correlation_id=correlation_id,
        partitions=[
            data_pb2.ProducePartition(
                topic=t,
                partition=p,
                records=r,
                **({} if epoch is None else {"current_leader_epoch": epoch}),
            )
            for t, p, r in parts
        ],
    )


async def test_produce_and_fetch_round_trip(stub, node: Node) -> None:
    batch = make_batch(4)
    reply = await stub.Produce(produce_request((T, 0, batch), (T, 1, b"junk"), ("x", 0, batch)))
    assert [(p.error_code, p.base_offset, p.last_offset) for p in reply.partitions] == [
        (ErrorCode.NONE, 0, 3),
        (ErrorCode.CORRUPT_MESSAGE, -1, -1),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1),
    ]
    fetched = await stub.Fetch(
        data_pb2.FetchRequest(
            correlation_id=7, partitions=[data_pb2.FetchPartition(topic=T, partition=0)]
        )
    )
    [p] = fetched.partitions
    assert fetched.correlation_id == 7
    assert (p.error_code, p.high_watermark, p.log_end_offset) == (ErrorCode.NONE, 4, 4)
    assert p.records[17:] == batch[17:]  # as stored: only base offset and epoch rewritten


async def test_acks_zero_answers_without_results(stub, node: Node) -> None:
    reply = await stub.Produce(
        produce_request((T, 0, make_batch(2)), acks=common_pb2.ACKS_NONE, correlation_id=3)
    )
    assert reply.correlation_id == 3 and not reply.partitions
    assert node.replicas.partitions[TopicPartition(T, 0)].log_end_offset == 2


async def test_a_refused_acks_zero_append_is_reported_to_the_gateway(stub) -> None:
    """So a gateway that routed by a stale image retries at the leader instead of losing the
    records (the client, as Kafka's, still hears nothing)."""
    reply = await stub.Produce(
        produce_request(("nope", 0, make_batch(1)), acks=common_pb2.ACKS_NONE, correlation_id=4)
    )
    assert reply.correlation_id == 4
    assert [p.error_code for p in reply.partitions] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]


async def test_unknown_acks_value(stub) -> None:
    reply = await stub.Produce(produce_request((T, 0, make_batch()), acks=17))
    assert reply.partitions[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS


async def test_produce_stream_echoes_correlation_ids(stub, node: Node) -> None:
    requests = [
        produce_request((T, 0, make_batch(2)), correlation_id=i, acks=acks)
        for i, acks in enumerate(
            [
                common_pb2.ACKS_LEADER,
                common_pb2.ACKS_ALL,
                common_pb2.ACKS_NONE,
                common_pb2.ACKS_LEADER,
            ]
        )
    ]
    requests.append(produce_request((T, 0, b""), correlation_id=99))
    call = stub.ProduceStream(iter(requests))
    replies = [r async for r in call]
    by_id = {r.correlation_id: r.partitions[0] for r in replies}
    assert sorted(by_id) == [0, 1, 3, 99]  # acks=0 gets no answer
    assert [by_id[i].base_offset for i in (0, 1, 3)] == [0, 2, 6]
    assert by_id[99].error_code == ErrorCode.INVALID_REQUEST


async def test_whole_request_error_is_a_status(stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as exc:
        await stub.Fetch(
            data_pb2.FetchRequest(
                max_bytes=-1, partitions=[data_pb2.FetchPartition(topic=T, partition=0)]
            )
        )
    assert exc.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert from_rpc_error(exc.value).code == ErrorCode.INVALID_REQUEST


async def test_long_poll_fetch(stub, node: Node) -> None:
    waiting = asyncio.ensure_future(
        stub.Fetch(
            data_pb2.FetchRequest(
                min_bytes=1,
                max_wait_ms=30_000,
                partitions=[data_pb2.FetchPartition(topic=T, partition=1)],
            )
        )
    )
    # The fetch is parked in the purgatory (observed, not guessed with a sleep), and stays
    # unanswered until the records arrive.
    for _ in range(1000):
        if len(node.purgatory) or waiting.done():
            break
        await asyncio.sleep(0.005)
    assert len(node.purgatory) == 1 and not waiting.done()
    await stub.Produce(produce_request((T, 1, make_batch(3))))
    reply = await asyncio.wait_for(waiting, 10)
    assert reply.partitions[0].records and reply.partitions[0].high_watermark == 3


async def test_offsets_requests(stub) -> None:
    await stub.Produce(produce_request((T, 0, make_batch(5))))
    listed = await stub.ListOffsets(
        data_pb2.ListOffsetsRequest(
            partitions=[
                data_pb2.ListOffsetsPartition(
                    topic=T, partition=0, spec=common_pb2.OFFSET_SPEC_LATEST
                ),
                data_pb2.ListOffsetsPartition(
                    topic=T, partition=0, spec=common_pb2.OFFSET_SPEC_EARLIEST
                ),
                data_pb2.ListOffsetsPartition(topic="nope", partition=0),
            ]
        )
    )
    assert [(p.error_code, p.offset) for p in listed.partitions] == [
        (ErrorCode.NONE, 5),
        (ErrorCode.NONE, 0),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    ]
    deleted = await stub.DeleteRecords(
        data_pb2.DeleteRecordsRequest(
            partitions=[data_pb2.DeleteRecordsPartition(topic=T, partition=0, offset=-1)]
        )
    )
    assert [(p.error_code, p.low_watermark) for p in deleted.partitions] == [(ErrorCode.NONE, 5)]
    dirs = await stub.DescribeLogDirs(storage_pb2.DescribeLogDirsRequest())
    [log_dir] = dirs.log_dirs
    assert dirs.node_id == 1
    assert {(p.topic, p.partition) for p in log_dir.partitions} == {(T, 0), (T, 1)}
    [p0] = [p for p in log_dir.partitions if p.partition == 0]
    assert (p0.log_start_offset, p0.log_end_offset, p0.high_watermark) == (5, 5, 5)


async def test_write_txn_markers_fences_an_older_coordinator_and_read_committed_sees_it(
    stub,
) -> None:
    builder = BatchBuilder(producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True)
    builder.append(1_700_000_000_000, b"k", b"v")
    assert (await stub.Produce(produce_request((T, 0, builder.build())))).partitions[
        0
    ].error_code == 0

    def marker(
        coordinator_epoch: int, committed: bool = False
    ) -> storage_pb2.WriteTxnMarkersRequest:
        return storage_pb2.WriteTxnMarkersRequest(
            producer_id=9,
            producer_epoch=1,
            committed=committed,
            coordinator_epoch=coordinator_epoch,
            topic=T,
            partition=0,
            timeout_ms=5_000,
        )

    def read_committed() -> data_pb2.FetchRequest:
        return data_pb2.FetchRequest(
            isolation_level=common_pb2.READ_COMMITTED,
            partitions=[data_pb2.FetchPartition(topic=T, partition=0)],
        )

    [open_txn] = (await stub.Fetch(read_committed())).partitions
    assert (open_txn.last_stable_offset, open_txn.high_watermark, open_txn.records) == (0, 1, b"")
    written = await stub.WriteTxnMarkers(marker(5))
    assert (written.error_code, written.offset) == (ErrorCode.NONE, 1)
    fenced = await stub.WriteTxnMarkers(marker(4, committed=True))
    assert fenced.error_code == ErrorCode.TRANSACTION_COORDINATOR_FENCED, fenced
    [ended] = (await stub.Fetch(read_committed())).partitions
    assert (ended.last_stable_offset, ended.high_watermark) == (2, 2)
    assert [(a.producer_id, a.first_offset) for a in ended.aborted_transactions] == [(9, 0)]
