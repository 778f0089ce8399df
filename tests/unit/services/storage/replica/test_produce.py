"""Produce on the leader: offsets assigned, the high watermark moved, and every kind of bad
input answered with its own code on its own partition, with nothing appended."""

import asyncio
import struct
from pathlib import Path

import pytest
from storage_replica_testkit import (
    NODE,
    OTHER,
    Node,
    image,
    make_batch,
    make_node,
    produce_params,
    topic,
)

from riverlog.common.errors import ErrorCode
from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.requests import Acks

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


@pytest.fixture(autouse=True)
def _topics(node: Node) -> None:
    node.replicas.apply_image(
        image(topic("t", leaders=[NODE, NODE], epoch=2), topic("x", leaders=[OTHER]))
    )


def leo(node: Node, tp: TopicPartition) -> int:
    return node.replicas.partitions[tp].log_end_offset


@pytest.mark.parametrize("acks", [Acks.LEADER, Acks.ALL, Acks.NONE])
async def test_appends_and_assigns_offsets(node: Node, acks: Acks) -> None:
    first = await node.produce.produce(produce_params((T0, make_batch(3)), acks=acks))
    second = await node.produce.produce(
        produce_params((T0, make_batch(2) + make_batch(4)), (T1, make_batch(1)), acks=acks)
    )
    assert [(r.error, r.base_offset, r.last_offset) for r in first] == [(ErrorCode.NONE, 0, 2)]
    assert [(r.error, r.base_offset, r.last_offset) for r in second] == [
        (ErrorCode.NONE, 3, 8),
        (ErrorCode.NONE, 0, 0),
    ]
    assert second[0].log_start_offset == 0 and second[0].log_append_time_ms == -1
    assert node.replicas.partitions[T0].high_watermark == 9


def corrupt_crc(batch: bytes) -> bytes:
    data = bytearray(batch)
    data[-1] ^= 0xFF
    return bytes(data)


def oversize_batch() -> bytes:
    return make_batch(1, value_size=1_100_000)


BAD_PAYLOADS = {
    "empty": (b"", ErrorCode.INVALID_REQUEST),
    "garbage": (b"hello, this is not a record batch at all" * 3, ErrorCode.CORRUPT_MESSAGE),
    "wrong-crc": (corrupt_crc(make_batch(2)), ErrorCode.CORRUPT_MESSAGE),
    "torn": (make_batch(2)[:-5], ErrorCode.CORRUPT_MESSAGE),
    "trailing-garbage": (make_batch(1) + b"\x00\x01", ErrorCode.CORRUPT_MESSAGE),
    "oversize": (oversize_batch(), ErrorCode.MESSAGE_TOO_LARGE),
    "bad-magic": (
        make_batch(1)[:16] + struct.pack(">b", 1) + make_batch(1)[17:],
        ErrorCode.CORRUPT_MESSAGE,
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_PAYLOADS))
async def test_bad_payload_fails_only_its_partition(node: Node, name: str) -> None:
    payload, code = BAD_PAYLOADS[name]
    await node.produce.produce(produce_params((T0, make_batch(1))))
    results = await node.produce.produce(produce_params((T0, payload), (T1, make_batch(2))))
    assert results[0].error == code, results[0].error_message
    assert results[0].error_message
    assert results[0].base_offset == -1
    assert leo(node, T0) == 1  # nothing of the bad payload was written
    assert (results[1].error, results[1].base_offset) == (ErrorCode.NONE, 0)


async def test_a_bad_batch_among_good_ones_appends_nothing(node: Node) -> None:
    payload = make_batch(2) + corrupt_crc(make_batch(2)) + make_batch(2)
    [result] = await node.produce.produce(produce_params((T0, payload)))
    assert result.error == ErrorCode.CORRUPT_MESSAGE
    assert leo(node, T0) == 0


async def test_routing_and_epoch_errors(node: Node) -> None:
    results = await node.produce.produce(
        produce_params(
            (TopicPartition("x", 0), make_batch()),
            (TopicPartition("missing", 0), make_batch()),
            (TopicPartition("t", 9), make_batch()),
        )
    )
    assert [r.error for r in results] == [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    fenced = await node.produce.produce(produce_params((T0, make_batch()), epoch=1))
    ahead = await node.produce.produce(produce_params((T0, make_batch()), epoch=3))
    current = await node.produce.produce(produce_params((T0, make_batch()), epoch=2))
    assert fenced[0].error == ErrorCode.FENCED_LEADER_EPOCH
    assert ahead[0].error == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert current[0].error == ErrorCode.NONE
    assert leo(node, T0) == 1


async def test_invalid_acks_and_duplicates(node: Node) -> None:
    results = await node.produce.produce(produce_params((T0, make_batch()), acks=None))
    assert results[0].error == ErrorCode.INVALID_REQUIRED_ACKS
    results = await node.produce.produce(produce_params((T0, make_batch()), (T0, make_batch())))
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    assert leo(node, T0) == 1


async def test_acks_all_needs_min_insync_replicas(node: Node) -> None:
    node.replicas.apply_image(
        image(
            topic("t", leaders=[NODE, NODE], epoch=2, configs={"min.insync.replicas": "2"}),
            version=2,
        )
    )
    results = await node.produce.produce(produce_params((T0, make_batch()), acks=Acks.ALL))
    assert results[0].error == ErrorCode.NOT_ENOUGH_REPLICAS
    results = await node.produce.produce(produce_params((T0, make_batch()), acks=Acks.LEADER))
    assert results[0].error == ErrorCode.NONE


async def test_acks_all_times_out_when_the_isr_does_not_catch_up(tmp_path: Path) -> None:
    # Two replicas in the ISR and no follower fetching: the high watermark cannot move.
    node = make_node(tmp_path / "logs")
    try:
        node.replicas.apply_image(
            image(topic("t", leaders=[NODE], epoch=2, replicas=[[NODE, OTHER]]), version=2)
        )
        results = await node.produce.produce(
            produce_params((T0, make_batch()), acks=Acks.ALL, timeout_ms=20)
        )
        assert results[0].error == ErrorCode.REQUEST_TIMED_OUT
        assert leo(node, T0) == 1  # written, not yet committed
        # A follower fetch at the log end commits it.
        partition = node.replicas.partitions[T0]
        partition.replication.update_follower_fetch_state(OTHER, 1)
        assert partition.high_watermark == 1
    finally:
        node.close()


async def test_acks_all_waiting_when_the_replica_is_reassigned_away(tmp_path: Path) -> None:
    # The leader is moved off this node while an acks=all produce waits for the ISR: the
    # producer hears at once that leadership moved (and retries at the new leader), instead of
    # waiting out its timeout on a partition this node no longer hosts.
    node = make_node(tmp_path / "moved")  # not the fixture node's dir: this one deletes
    try:
        node.replicas.apply_image(
            image(topic("t", leaders=[NODE], epoch=2, replicas=[[NODE, OTHER]]), version=2)
        )
        waiting = asyncio.create_task(
            node.produce.produce(
                produce_params((T0, make_batch()), acks=Acks.ALL, timeout_ms=60_000)
            )
        )
        for _ in range(100):  # until it is appended and waits in the purgatory
            await asyncio.sleep(0)
            if T0 in node.replicas.partitions and leo(node, T0) == 1:
                break
        node.replicas.apply_image(
            image(topic("t", leaders=[OTHER], epoch=3, replicas=[[OTHER]]), version=3)
        )
        async with asyncio.timeout(10):
            results = await waiting
        assert results[0].error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        node.close()
