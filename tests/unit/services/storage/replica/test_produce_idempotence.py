"""Produce on the leader with producer ids: the ProduceHandler path answers a retried batch
with the offsets of its first write (for every acks, acks=all included) and appends nothing,
and refuses a gap and an old epoch on their own partition only."""

import pytest
from storage_replica_testkit import NODE, Node, image, produce_params, topic

from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.requests import Acks

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
PID = 77


@pytest.fixture(autouse=True)
def _topics(node: Node) -> None:
    node.replicas.apply_image(image(topic("t", leaders=[NODE, NODE], epoch=2)))


def batch(seq: int, count: int = 2, epoch: int = 0) -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE, producer_id=PID, producer_epoch=epoch, base_sequence=seq
    )
    for i in range(count):
        builder.append(1_700_000_000_000, None, b"v%d" % (seq + i))
    return builder.build()


@pytest.mark.parametrize("acks", [Acks.LEADER, Acks.ALL])
async def test_a_retry_gets_the_original_offsets(node: Node, acks: Acks) -> None:
    await node.produce.produce(produce_params((T0, batch(0)), acks=acks))
    first = await node.produce.produce(produce_params((T0, batch(2)), acks=acks))
    retry = await node.produce.produce(produce_params((T0, batch(2)), acks=acks))
    assert [(r.error, r.base_offset, r.last_offset) for r in first] == [(ErrorCode.NONE, 2, 3)]
    assert [(r.error, r.base_offset, r.last_offset) for r in retry] == [(ErrorCode.NONE, 2, 3)]
    assert node.replicas.partitions[T0].log_end_offset == 4


async def test_a_gap_and_an_old_epoch_fail_only_their_partition(node: Node) -> None:
    await node.produce.produce(produce_params((T0, batch(0, epoch=1))))
    results = await node.produce.produce(
        produce_params((T0, batch(5, epoch=1)), (T1, batch(0, epoch=1)))
    )
    assert [r.error for r in results] == [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.NONE]
    old = await node.produce.produce(produce_params((T0, batch(2, epoch=0))))
    assert [r.error for r in old] == [ErrorCode.INVALID_PRODUCER_EPOCH]
    assert node.replicas.partitions[T0].log_end_offset == 2
