"""The SDK's describe_log_dirs pieces: the request's topics grouped, the answer's nodes, node
errors and topic errors (the call itself runs against real gateways in
tests/integration/client/test_log_dirs.py)."""

from riverlog.client.log_dirs_admin import _topics_to_proto, log_dirs_from_proto
from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.v1 import admin_pb2


def test_names_ask_every_partition_and_partitions_are_grouped_by_topic() -> None:
    asked = _topics_to_proto(
        [TopicPartition("a", 1), "b", TopicPartition("a", 0), TopicPartition("a", 1), "a"]
    )
    assert [(t.topic, list(t.partitions)) for t in asked] == [("a", []), ("b", [])]
    asked = _topics_to_proto([TopicPartition("a", 1), TopicPartition("a", 0)])
    assert [(t.topic, list(t.partitions)) for t in asked] == [("a", [1, 0])]


def test_the_answer_keeps_nodes_dirs_replicas_and_every_error() -> None:
    response = admin_pb2.DescribeClusterLogDirsResponse(
        nodes=[
            admin_pb2.NodeLogDirs(
                node_id=1,
                log_dirs=[
                    admin_pb2.LogDirDescription(
                        log_dir="/d1",
                        topics=[
                            admin_pb2.LogDirTopic(
                                topic="t",
                                partitions=[
                                    admin_pb2.LogDirPartition(
                                        partition=0,
                                        size_bytes=10,
                                        remote_size_bytes=20,
                                        log_start_offset=1,
                                        local_log_start_offset=5,
                                        log_end_offset=9,
                                    )
                                ],
                            )
                        ],
                    ),
                    admin_pb2.LogDirDescription(
                        log_dir="/d2",
                        error_code=ErrorCode.KAFKA_STORAGE_ERROR,  # type: ignore[arg-type]
                    ),
                ],
            ),
            admin_pb2.NodeLogDirs(
                node_id=2,
                error_code=ErrorCode.REQUEST_TIMED_OUT,  # type: ignore[arg-type]
                error_message="storage node 2 did not answer",
            ),
        ],
        errors=[
            admin_pb2.LogDirsError(
                topic="x",
                partition=-1,
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,  # type: ignore[arg-type]
            )
        ],
    )
    result = log_dirs_from_proto(response)
    d1 = result.nodes[1]["/d1"]
    assert d1.error is None and d1.total_bytes == 10
    info = d1.replica_infos[TopicPartition("t", 0)]
    assert (info.size_bytes, info.remote_size_bytes, info.local_log_start_offset) == (10, 20, 5)
    assert result.nodes[1]["/d2"].error.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert list(result.node_errors) == [2]
    assert result.node_errors[2].code == ErrorCode.REQUEST_TIMED_OUT
    assert result.errors[TopicPartition("x", -1)].code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert result.replicas(TopicPartition("t", 0)) == {1: info}
