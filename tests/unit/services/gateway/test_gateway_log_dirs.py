"""DescribeLogDirs at the gateway (decision 0040): the filter's errors, the nodes asked, a node
that is down or does not answer, and reassignment progress reading through the same path."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from gateway_fakes import FakeSource, make_image

from riverlog.common.cluster import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.gateway.context import Deadline
from riverlog.services.gateway.log_dirs import (
    LogDirInfo,
    LogDirs,
    LogDirsQuery,
    ReplicaLogInfo,
    nodes_to_ask,
    wanted_replicas,
)
from riverlog.services.gateway.reassignment_progress import ReassignmentProgress
from riverlog.services.gateway.routing.metadata_cache import MetadataCache
from riverlog.services.gateway.rpc.convert import log_dirs_query_from_proto, log_dirs_to_proto
from riverlog.v1 import admin_pb2

IMAGE = make_image(1, {"t": [1, 2, 1], "u": [3]}, storage=(1, 2, 3))


def replica(topic: str, partition: int, size: int = 100, leo: int = 10) -> ReplicaLogInfo:
    return ReplicaLogInfo(TopicPartition(topic, partition), size, 0, 0, leo, remote_size_bytes=7)


class Sender:
    """Each node holds a replica of every partition of the image; `down` nodes fail,
    `paused` ones never answer."""

    def __init__(self, down: frozenset[int] = frozenset(), paused: frozenset[int] = frozenset()):
        self.down = down
        self.paused = paused
        self.asked: list[int] = []

    async def describe_log_dirs(self, node: NodeInfo, deadline: Deadline) -> list[LogDirInfo]:
        self.asked.append(node.node_id)
        if node.node_id in self.down:
            raise RiverlogError(f"node {node.node_id} refused", ErrorCode.NETWORK_EXCEPTION)
        if node.node_id in self.paused:
            await asyncio.sleep(deadline.remaining())
            raise RiverlogError("timed out", ErrorCode.REQUEST_TIMED_OUT)
        replicas = tuple(
            replica(t, p.partition, size=1000 * node.node_id + p.partition)
            for t, info in sorted(IMAGE.topics.items())
            for p in info.partitions
        )
        return [LogDirInfo(f"/data/{node.node_id}", replicas)]


def log_dirs(sender: Sender) -> LogDirs:
    return LogDirs(MetadataCache(FakeSource(IMAGE)), sender)


def test_the_filter_names_unknown_and_invalid_topics_and_partitions() -> None:
    wanted, errors = wanted_replicas(IMAGE, {"t": (0, 7), "nope": (), "bad/name": (), "u": ()})
    assert wanted == {TopicPartition("t", 0), TopicPartition("u", 0)}
    assert [(e.topic, e.partition, e.error_code) for e in errors] == [
        ("t", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("nope", -1, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("bad/name", -1, ErrorCode.INVALID_TOPIC_EXCEPTION),
    ]


def test_every_node_holding_a_replica_is_asked_even_when_not_live() -> None:
    image = make_image(1, {"t": [1]}, storage=(1, 2))
    moved = image.topics["t"].partitions[0]
    t = replace(image.topics["t"], partitions=(replace(moved, replicas=(1, 2, 5)),))
    image = replace(image, topics={"t": t})
    assert nodes_to_ask(image, ()) == [1, 2, 5]
    assert nodes_to_ask(image, (2, 2, 9)) == [2, 9]


async def test_a_filtered_call_keeps_only_the_asked_replicas() -> None:
    answer = await log_dirs(Sender()).describe(
        LogDirsQuery({"t": (1,), "nope": ()}), Deadline.after(5)
    )
    assert [n.node_id for n in answer.nodes] == [1, 2, 3]
    for node in answer.nodes:
        [d] = node.log_dirs
        assert [r.tp for r in d.replicas] == [TopicPartition("t", 1)]
        assert d.replicas[0].size_bytes == 1000 * node.node_id + 1
    assert [(e.topic, e.error_code) for e in answer.errors] == [
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    ]


async def test_nodes_that_fail_or_are_not_live_are_named_and_the_others_answered() -> None:
    sender = Sender(down=frozenset({2}))
    answer = await log_dirs(sender).describe(LogDirsQuery(node_ids=(1, 2, 8)), Deadline.after(5))
    by_node = {n.node_id: n for n in answer.nodes}
    assert by_node[1].error_code == ErrorCode.NONE and len(by_node[1].log_dirs[0].replicas) == 4
    assert (by_node[2].error_code, by_node[2].log_dirs) == (ErrorCode.NETWORK_EXCEPTION, ())
    assert "refused" in by_node[2].error_message
    assert by_node[8].error_code == ErrorCode.BROKER_NOT_AVAILABLE
    assert sorted(sender.asked) == [1, 2]  # node 8 is not live: not called


async def test_a_node_that_does_not_answer_holds_back_no_one_past_the_deadline() -> None:
    sender = Sender(paused=frozenset({3}))
    answer = await log_dirs(sender).describe(LogDirsQuery(), Deadline.after(0.2))
    codes = {n.node_id: n.error_code for n in answer.nodes}
    assert codes == {1: ErrorCode.NONE, 2: ErrorCode.NONE, 3: ErrorCode.REQUEST_TIMED_OUT}


async def test_reassignment_progress_reads_sizes_through_the_same_path() -> None:
    sender = Sender(down=frozenset({3}))
    progress = ReassignmentProgress(log_dirs(sender))
    logs = await progress.replica_logs({TopicPartition("t", 2): (1, 3)}, Deadline.after(5))
    assert logs == {TopicPartition("t", 2): {1: (10, 1002)}}
    assert sorted(sender.asked) == [1, 3]


async def test_the_wire_groups_replicas_by_topic_and_keeps_tiered_fields() -> None:
    request = admin_pb2.DescribeClusterLogDirsRequest(
        topics=[
            admin_pb2.DescribableLogDirTopic(topic="t", partitions=[2]),
            admin_pb2.DescribableLogDirTopic(topic="t", partitions=[0, 2]),
            admin_pb2.DescribableLogDirTopic(topic="u"),
        ],
        node_ids=[1],
    )
    query = log_dirs_query_from_proto(request)
    assert query.topics == {"t": (2, 0), "u": ()} and query.node_ids == (1,)
    assert log_dirs_query_from_proto(admin_pb2.DescribeClusterLogDirsRequest()).topics is None

    answer = await log_dirs(Sender()).describe(query, Deadline.after(5))
    [node] = log_dirs_to_proto(answer).nodes
    [d] = node.log_dirs
    assert [(t.topic, [p.partition for p in t.partitions]) for t in d.topics] == [
        ("t", [0, 2]),
        ("u", [0]),
    ]
    p = d.topics[0].partitions[0]
    assert (p.size_bytes, p.remote_size_bytes, p.log_end_offset, p.is_future) == (
        1000,
        7,
        10,
        False,
    )
