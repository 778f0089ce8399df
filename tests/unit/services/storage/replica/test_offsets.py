"""ListOffsets (latest, earliest, max timestamp, by timestamp, Kafka's special timestamps),
DeleteRecords (-1 = the high watermark, never past it) and DescribeLogDirs."""

import pytest
from storage_replica_testkit import NODE, OTHER, TS, Node, image, make_batch, produce_params, topic

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.requests import (
    DeleteRecordsPartitionData,
    EpochEndOffsetData,
    ListOffsetsPartitionData,
    OffsetSpec,
)

T0 = TopicPartition("t", 0)


@pytest.fixture(autouse=True)
async def _data(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", epoch=4), topic("x", leaders=[OTHER])))
    # Offsets 0-2 at TS..TS+2, 3-5 at TS+100..TS+102, 6-7 at TS+50..TS+51.
    for count, ts in ((3, TS), (3, TS + 100), (2, TS + 50)):
        [r] = await node.produce.produce(produce_params((T0, make_batch(count, ts=ts))))
        assert r.error == ErrorCode.NONE


def one(node: Node, spec: OffsetSpec, ts: int = -1, tp: TopicPartition = T0, epoch=None):
    [result] = node.offsets.list_offsets([ListOffsetsPartitionData(tp, spec, ts, epoch)])
    return result


def test_latest_and_earliest(node: Node) -> None:
    latest = one(node, OffsetSpec.LATEST)
    assert (latest.error, latest.offset, latest.timestamp_ms, latest.leader_epoch) == (
        ErrorCode.NONE,
        8,
        -1,
        4,
    )
    assert one(node, OffsetSpec.EARLIEST).offset == 0
    # Kafka's special timestamps with the TIMESTAMP spec.
    assert one(node, OffsetSpec.TIMESTAMP, -1).offset == 8
    assert one(node, OffsetSpec.TIMESTAMP, -2).offset == 0
    assert one(node, OffsetSpec.TIMESTAMP, -3).offset == 5
    assert one(node, OffsetSpec.TIMESTAMP, -7).error == ErrorCode.INVALID_REQUEST


def test_by_timestamp(node: Node) -> None:
    assert (
        one(node, OffsetSpec.TIMESTAMP, TS).offset,
        one(node, OffsetSpec.TIMESTAMP, TS).timestamp_ms,
    ) == (0, TS)
    found = one(node, OffsetSpec.TIMESTAMP, TS + 3)
    assert (found.offset, found.timestamp_ms) == (3, TS + 100)
    assert one(node, OffsetSpec.TIMESTAMP, TS + 101).offset == 4
    none = one(node, OffsetSpec.TIMESTAMP, TS + 1000)
    assert (none.error, none.offset, none.timestamp_ms) == (ErrorCode.NONE, -1, -1)


def test_max_timestamp(node: Node) -> None:
    found = one(node, OffsetSpec.MAX_TIMESTAMP)
    assert (found.offset, found.timestamp_ms) == (5, TS + 102)


def test_never_past_the_high_watermark(node: Node) -> None:
    node.replicas.partitions[T0].log.high_watermark = 3
    assert one(node, OffsetSpec.LATEST).offset == 3
    assert one(node, OffsetSpec.TIMESTAMP, TS + 3).offset == -1


def test_errors(node: Node) -> None:
    assert one(node, OffsetSpec.LATEST, tp=TopicPartition("x", 0)).error == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER
    )
    assert one(node, OffsetSpec.LATEST, tp=TopicPartition("nope", 0)).error == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    assert one(node, OffsetSpec.LATEST, epoch=3).error == ErrorCode.FENCED_LEADER_EPOCH


def test_delete_records(node: Node) -> None:
    results = node.offsets.delete_records(
        [
            DeleteRecordsPartitionData(T0, 4),
            DeleteRecordsPartitionData(TopicPartition("nope", 0), 1),
        ]
    )
    assert [(r.error, r.low_watermark) for r in results] == [
        (ErrorCode.NONE, 4),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
    ]
    assert one(node, OffsetSpec.EARLIEST).offset == 4
    for bad in (9, -2):
        [r] = node.offsets.delete_records([DeleteRecordsPartitionData(T0, bad)])
        assert r.error == ErrorCode.OFFSET_OUT_OF_RANGE
    [r] = node.offsets.delete_records([DeleteRecordsPartitionData(T0, -1)])
    assert (r.error, r.low_watermark) == (ErrorCode.NONE, 8)
    [r] = node.offsets.delete_records([DeleteRecordsPartitionData(T0, 2)])
    assert (r.error, r.low_watermark) == (ErrorCode.NONE, 8)  # never moves back


def test_describe_log_dirs(node: Node) -> None:
    [log_dir] = node.offsets.describe_log_dirs()
    assert log_dir.path == str(node.root) and log_dir.error == ErrorCode.NONE
    [p] = log_dir.partitions
    assert (p.tp, p.log_start_offset, p.log_end_offset, p.high_watermark, p.segment_count) == (
        T0,
        0,
        8,
        8,
        1,
    )
    assert p.size_bytes > 0 and log_dir.total_bytes == p.size_bytes
    assert (p.remote_size_bytes, p.local_log_start_offset) == (0, 0)  # not tiered
    assert NODE == node.replicas.node_id


def test_describe_log_dirs_reports_the_remote_tier_as_the_log_knows_it(node: Node) -> None:
    [log] = node.replicas.log_manager.all_logs()
    log.remote_size_bytes = 1234  # as the remote log manager publishes it
    [p] = node.offsets.describe_log_dirs()[0].partitions
    assert p.remote_size_bytes == 1234


def test_describe_log_dirs_names_an_offline_dir(node: Node) -> None:
    node.replicas.log_manager.mark_offline(node.root)
    [log_dir] = node.offsets.describe_log_dirs()
    assert log_dir.error == ErrorCode.KAFKA_STORAGE_ERROR
    assert "offline" in log_dir.error_message
    assert log_dir.partitions == []  # as Kafka: an offline dir lists no replica


async def test_offsets_for_leader_epoch_answers_from_the_epoch_cache(node: Node) -> None:
    # The fixture's 8 records were written at epoch 4; epoch 6 starts at 8.
    node.replicas.apply_image(image(topic("t", epoch=6), topic("x", leaders=[OTHER]), version=3))
    [r] = await node.produce.produce(produce_params((T0, make_batch(2))))
    assert r.error == ErrorCode.NONE

    def ask(epoch: int, current: int | None = 6) -> tuple[ErrorCode, int, int]:
        [result] = node.offsets.offsets_for_leader_epoch([EpochEndOffsetData(T0, epoch, current)])
        return result.error, result.leader_epoch, result.end_offset

    assert ask(4) == (ErrorCode.NONE, 4, 8)
    assert ask(5) == (ErrorCode.NONE, 4, 8)  # never led at 5: where 4 ended
    assert ask(6) == (ErrorCode.NONE, 6, 10)  # the current epoch: the log end
    assert ask(7) == (ErrorCode.NONE, -1, -1)  # newer than any here
    assert ask(4, current=5)[0] == ErrorCode.FENCED_LEADER_EPOCH
    assert ask(4, current=7)[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    [other] = node.offsets.offsets_for_leader_epoch([EpochEndOffsetData(TopicPartition("x", 0), 0)])
    assert other.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
