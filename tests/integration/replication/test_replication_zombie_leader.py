"""A leader paused (SIGSTOP) past its lease and resumed is a zombie: the controller has moved
leadership to a follower at a newer leader epoch. The zombie must take no write (a produce
queued on its socket while it was paused is refused when it resumes: its lease is older than the
TTL, and after registering again it waits for a newer image), then become a follower, truncate
by epoch and catch up, ending byte-identical to the new leader with every acknowledged record
in place."""

from __future__ import annotations

import threading

import pytest
from replication_harness import ReplicationHarness, make_batch, wait_until

from riverlog.common.errors import ErrorCode
from riverlog.v1 import common_pb2, data_pb2, storage_pb2

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

ALL = {1, 2, 3}


def test_paused_leader_resumes_as_a_follower_and_takes_no_write(
    harness: ReplicationHarness,
) -> None:
    topic = harness.create_topic("zombie-leader")
    harness.wait_isr(topic, ALL)
    old = harness.state(topic)
    zombie = old.leader
    acknowledged: dict[int, bytes] = {}
    for i in range(5):
        batch = make_batch(4, tag=i)
        result = harness.produce(zombie, topic, batch)
        assert result.error_code == ErrorCode.NONE
        acknowledged[result.base_offset] = batch

    process = harness.cluster.storage(zombie)
    # A connection opened before the pause: requests sent on it wait in the socket buffers.
    channel_context = harness.storage(zombie)
    stub = channel_context.__enter__()
    stub.DescribeLogDirs(storage_pb2.DescribeLogDirsRequest(), timeout=10)
    process.pause()
    queued: list[data_pb2.ProducePartitionResponse | BaseException] = []

    request = data_pb2.ProduceRequest(
        acks=common_pb2.ACKS_LEADER,
        timeout_ms=30_000,
        partitions=[
            data_pb2.ProducePartition(topic=topic, partition=0, records=make_batch(4, tag=66))
        ],
    )

    def send_to_zombie() -> None:
        try:
            queued.append(stub.Produce(request, timeout=60).partitions[0])
        except BaseException as exc:  # reported by the assertion below
            queued.append(exc)

    try:
        new = wait_until(
            lambda: (s := harness.state(topic)).leader not in (-1, zombie) and s,
            60,
            "leadership to move off the paused node",
        )
        assert new.leader_epoch > old.leader_epoch
        # A produce reaches the zombie's socket while it is still paused.
        sender = threading.Thread(target=send_to_zombie, daemon=True)
        sender.start()
        for i in range(5, 8):
            batch = make_batch(4, tag=i)
            result = harness.produce_to_leader(topic, batch)
            assert result.error_code == ErrorCode.NONE, result.error_message
            acknowledged[result.base_offset] = batch
    finally:
        process.resume()
    sender.join(60)
    channel_context.__exit__(None, None, None)
    assert queued, "the produce sent to the paused node never completed"
    assert isinstance(queued[0], data_pb2.ProducePartitionResponse), queued[0]
    assert queued[0].error_code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
    ), queued[0]

    harness.wait_isr(topic, ALL)
    harness.wait_converged(topic, ALL)
    leader = harness.state(topic).leader
    assert leader != zombie or harness.state(topic).leader_epoch > new.leader_epoch
    assert harness.log_bytes(zombie, topic) == harness.log_bytes(leader, topic)
    read = dict(harness.read_all(leader, topic))
    assert sorted(read) == sorted(acknowledged)
    for offset, batch in acknowledged.items():
        # Same records (the leader rewrote only the base offset and epoch of the header).
        assert read[offset][61:] == batch[61:]
