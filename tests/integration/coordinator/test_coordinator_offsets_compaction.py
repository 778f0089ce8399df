"""`__consumer_offsets` becomes a compacted topic without losing committed offsets (decision
0008), on real processes: a cluster whose offsets topic is on `cleanup.policy=delete` (as every
cluster created before compaction) gets many commits and a deleted group; a coordinator
restart switches the topic to `compact`, the storage node's log cleaner compacts it (the log
then has gaps and tombstones), and a coordinator loading that log serves the same offsets, and
not the deleted group's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from group_client import stub_for, wait_until

from riverlog.client import AdminClient
from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.errors import ErrorCode
from riverlog.common.records import iter_batches_records, next_fetch_offset
from riverlog.common.rpc.channel import sync_channel
from riverlog.v1 import coordinator_pb2 as pb
from riverlog.v1 import data_pb2, gateway_pb2_grpc, storage_pb2_grpc

E = ErrorCode
OFFSETS = "__consumer_offsets"
PARTITIONS = 4
ROUNDS = 60

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def compaction_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(
        Path(tmp_path_factory.mktemp("compaction")),
        storage_nodes=1,
        metadata_nodes=1,
        gateways=1,
        coordinators=1,
        extra_config={
            "metadata": {
                "broker.session.timeout.ms": "2000",
                "broker.heartbeat.interval.ms": "300",
                "offsets.topic.num.partitions": "1",  # every group on one log
            },
            "storage": {"log.cleaner.backoff.ms": "200"},
        },
    ) as local:
        yield local


def _policy(admin: AdminClient) -> str:
    return admin.describe_configs([OFFSETS])[OFFSETS]["cleanup.policy"].value


def _commit(
    stub: gateway_pb2_grpc.GatewayStub, group: str, topic: str, offsets: dict[int, int]
) -> bool:
    parts = [pb.OffsetCommitPartition(partition=p, committed_offset=o) for p, o in offsets.items()]
    request = pb.OffsetCommitRequest(
        group_id=group,
        generation_id=-1,
        topics=[pb.OffsetCommitTopic(name=topic, partitions=parts)],
    )
    response = stub.OffsetCommit(request, timeout=30)
    codes = [p.error_code for t in response.topics for p in t.partitions]
    return response.error_code == E.NONE and codes == [E.NONE] * len(offsets)


def _fetch(stub: gateway_pb2_grpc.GatewayStub, group: str) -> dict[int, int] | None:
    response = stub.OffsetFetch(pb.OffsetFetchRequest(group_id=group, all_topics=True), timeout=30)
    if response.error_code != E.NONE:
        return None
    return {p.partition: p.committed_offset for t in response.topics for p in t.partitions}


def _log_shape(cluster: LocalCluster) -> tuple[int, int]:
    """(records left below the high watermark, high watermark) of __consumer_offsets-0, read
    from the storage node."""
    stub = storage_pb2_grpc.StorageServiceStub(sync_channel(cluster.storage_addresses[0]))  # type: ignore[no-untyped-call]
    position, count, end = 0, 0, None
    for _ in range(10_000):
        part = data_pb2.FetchPartition(
            topic=OFFSETS, partition=0, fetch_offset=position, partition_max_bytes=1 << 20
        )
        response = stub.Fetch(
            data_pb2.FetchRequest(max_bytes=1 << 20, partitions=[part]), timeout=10
        )
        fetched = response.partitions[0]
        assert fetched.error_code == E.NONE, fetched.error_message
        end = fetched.high_watermark if end is None else end
        count += sum(1 for r in iter_batches_records(fetched.records, position) if r.offset < end)
        position = next_fetch_offset(fetched.records, position)
        if position >= end or not fetched.records:
            return count, end
    raise AssertionError("the log did not end")


def test_offsets_survive_the_switch_to_compaction(compaction_cluster: LocalCluster) -> None:
    gateway = compaction_cluster.gateway_address
    stub = stub_for(gateway)
    admin = AdminClient({"bootstrap.servers": gateway})
    coordinator = compaction_cluster.coordinator(1)
    try:
        # a new cluster: the controller creates the topic with the delete policy, the
        # coordinator switches it at start-up
        wait_until(lambda: _policy(admin) == "compact", 60, "the start-up switch")

        # an existing cluster from before compaction; the running coordinator switched already
        # and looks again only when it starts. Small segments so the cleaner has work.
        admin.alter_configs(
            {
                OFFSETS: {
                    "cleanup.policy": "delete",
                    "segment.bytes": 2048,
                    "min.cleanable.dirty.ratio": 0.01,
                }
            }
        )
        wait_until(lambda: _policy(admin) == "delete", 30, "the delete policy")
        topic = unique_topic_name("compaction")
        compaction_cluster.create_topic(topic, partitions=PARTITIONS)
        kept, dropped = unique_topic_name("kept"), unique_topic_name("dropped")
        for round_ in range(ROUNDS):
            offsets = {p: 10 * round_ + p for p in range(PARTITIONS)}
            assert wait_until(lambda o=offsets: _commit(stub, kept, topic, o), 60, "a commit")
        expected = {p: 10 * (ROUNDS - 1) + p for p in range(PARTITIONS)}
        assert wait_until(lambda: _commit(stub, dropped, topic, {0: 5}), 60, "a commit")
        deleted = stub.DeleteGroups(pb.DeleteGroupsRequest(groups=[dropped]), timeout=30)
        assert [r.error_code for r in deleted.results] == [E.NONE]
        assert _fetch(stub, kept) == expected
        records_before, _ = _log_shape(compaction_cluster)
        assert records_before > ROUNDS * PARTITIONS  # every commit is still in the log

        coordinator.restart()  # the coordinator of the new code path starts: the switch
        wait_until(lambda: _policy(admin) == "compact", 60, "the switch after the restart")
        wait_until(
            lambda: _log_shape(compaction_cluster)[0] < records_before // 4,
            120,
            "the log cleaner compacting __consumer_offsets",
        )
        left, end = _log_shape(compaction_cluster)
        assert left < end  # the compacted log has gaps

        coordinator.restart()  # a load from the compacted log
        assert wait_until(lambda: _fetch(stub, kept), 60, "the offsets") == expected
        assert _fetch(stub, dropped) == {}
    finally:
        admin.close()
