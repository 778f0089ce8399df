"""The gateway's producer-id allocator: ids from metadata blocks, a new block when one runs out
(prefetched at 90%), never an id twice, epoch bumps, refusals."""

from __future__ import annotations

import asyncio

import pytest

from riverlog.common.cluster.producer_ids import block_source
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.producer_ids import (
    MAX_PRODUCER_EPOCH,
    ProducerIdAllocator,
    ProducerIdBlock,
)
from riverlog.v1 import metadata_pb2


class FakeBlocks:
    """Blocks of `size` ids from one counter, as the controller's etcd key; can fail once."""

    def __init__(self, size: int = 10) -> None:
        self.size = size
        self.next = 0
        self.calls = 0
        self.fail_next = False

    async def __call__(self) -> ProducerIdBlock:
        self.calls += 1
        await asyncio.sleep(0)
        if self.fail_next:
            self.fail_next = False
            raise RiverlogError("no controller", ErrorCode.NOT_CONTROLLER)
        block = ProducerIdBlock(self.next, self.size)
        self.next += self.size
        return block


async def test_ids_come_from_blocks_and_are_unique() -> None:
    blocks = FakeBlocks(size=10)
    allocator = ProducerIdAllocator(blocks)
    ids = [await allocator.next_id() for _ in range(35)]
    assert ids == list(range(35))
    assert blocks.calls == 4
    await allocator.close()


async def test_two_gateways_never_share_an_id() -> None:
    blocks = FakeBlocks(size=7)  # one controller counter, two gateways
    first, second = ProducerIdAllocator(blocks), ProducerIdAllocator(blocks)
    ids = await asyncio.gather(*[a.next_id() for _ in range(40) for a in (first, second)])
    assert len(set(ids)) == len(ids) == 80
    await first.close()
    await second.close()


async def test_the_next_block_is_prefetched_at_ninety_percent() -> None:
    blocks = FakeBlocks(size=10)
    allocator = ProducerIdAllocator(blocks)
    for _ in range(9):
        await allocator.next_id()
    for _ in range(3):
        await asyncio.sleep(0)
    assert blocks.calls == 2  # asked before the block ran out
    assert [await allocator.next_id() for _ in range(2)] == [9, 10]
    assert blocks.calls == 2
    await allocator.close()


async def test_a_failed_fetch_is_an_error_and_the_next_request_asks_again() -> None:
    blocks = FakeBlocks()
    blocks.fail_next = True
    allocator = ProducerIdAllocator(blocks)
    with pytest.raises(RiverlogError) as err:
        await allocator.next_id()
    assert err.value.code == ErrorCode.NOT_CONTROLLER
    assert await allocator.next_id() == 0
    await allocator.close()


async def test_init_producer_id_new_and_bumped() -> None:
    allocator = ProducerIdAllocator(FakeBlocks())
    first = await allocator.init_producer_id("", -1, -1)
    assert (first.producer_id, first.producer_epoch) == (0, 0)
    bumped = await allocator.init_producer_id("", first.producer_id, 0)
    assert (bumped.producer_id, bumped.producer_epoch) == (0, 1)
    exhausted = await allocator.init_producer_id("", 0, MAX_PRODUCER_EPOCH)
    assert (exhausted.producer_id, exhausted.producer_epoch) == (1, 0)
    await allocator.close()


@pytest.mark.parametrize(
    ("txn", "pid", "epoch", "code"),
    [
        ("txn-1", -1, -1, ErrorCode.NOT_COORDINATOR),  # its transaction coordinator answers
        ("", 5, -1, ErrorCode.INVALID_REQUEST),
        ("", -1, 3, ErrorCode.INVALID_REQUEST),
    ],
)
async def test_init_producer_id_refusals(txn: str, pid: int, epoch: int, code: ErrorCode) -> None:
    allocator = ProducerIdAllocator(FakeBlocks())
    with pytest.raises(RiverlogError) as err:
        await allocator.init_producer_id(txn, pid, epoch)
    assert err.value.code == code
    await allocator.close()


async def test_take_now_hands_out_ids_without_waiting_once_a_block_is_there() -> None:
    allocator = ProducerIdAllocator(FakeBlocks())
    with pytest.raises(RiverlogError) as err:
        allocator.take_now()  # no block yet: retriable, and the fetch starts
    assert err.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    first = await allocator.next_id()
    taken = [allocator.take_now() for _ in range(5)]
    assert taken == list(range(first + 1, first + 6))
    await allocator.close()


class FakeMetadata:
    """AllocateProducerIds answers: first refusals, then blocks."""

    def __init__(self, refusals: list[ErrorCode]) -> None:
        self.refusals = list(refusals)
        self.requests: list[object] = []

    async def call(self, method: str, request: object, timeout_s: float | None = None) -> object:
        assert method == "AllocateProducerIds"
        self.requests.append(request)
        if self.refusals:
            code = self.refusals.pop(0)
            return metadata_pb2.AllocateProducerIdsResponse(error_code=code, error_message="no")
        return metadata_pb2.AllocateProducerIdsResponse(
            producer_id_start=5000, producer_id_len=1000
        )


async def test_block_source_asks_as_the_gateway_node_and_waits_out_registration() -> None:
    metadata = FakeMetadata([ErrorCode.STALE_BROKER_EPOCH])  # not registered yet
    source = block_source(metadata, 3, lambda: 77, patience_s=5.0)
    assert await source() == ProducerIdBlock(5000, 1000)
    assert [(r.node_id, r.node_incarnation) for r in metadata.requests] == [(3, 77), (3, 77)]


async def test_block_source_gives_up_on_a_final_refusal() -> None:
    source = block_source(FakeMetadata([ErrorCode.CLUSTER_AUTHORIZATION_FAILED]), 3, lambda: 1)
    with pytest.raises(RiverlogError) as err:
        await source()
    assert err.value.code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
