"""KIP-890 part 1 on the produce path: a transactional batch with no transaction open at the
partition is appended only after its coordinator verified it; a refusal writes nothing; a
verification in flight holds up no other partition; a marker meanwhile voids it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from storage_replica_testkit import NODE, Node, image, make_node, produce_params, topic

from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.records.control import ControlRecordType, EndTxnMarker, build_end_txn_marker
from riverlog.common.types import TopicPartition
from riverlog.services.storage.log import AppendOrigin
from riverlog.services.storage.replica.produce import ProduceHandler, Verification
from riverlog.services.storage.replica.requests import ProduceParams

pytestmark = pytest.mark.timeout(30)

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
PID = 9
TS = 1_700_000_000_000


class Coordinator:
    """The transaction coordinator's verify_only answers, released by the test."""

    def __init__(self) -> None:
        self.answer: Verification = (ErrorCode.NONE, "")
        self.calls: list[tuple[str, int, int, TopicPartition]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def verify(
        self, transactional_id: str, producer_id: int, producer_epoch: int, tp: TopicPartition
    ) -> Verification:
        self.calls.append((transactional_id, producer_id, producer_epoch, tp))
        await self.gate.wait()
        return self.answer


@pytest.fixture
def coordinator() -> Coordinator:
    return Coordinator()


@pytest.fixture
def node(tmp_path: Path, coordinator: Coordinator) -> Iterator[Node]:
    made = make_node(tmp_path / "logs")
    made.produce = ProduceHandler(made.replicas, made.purgatory, coordinator)
    made.replicas.apply_image(image(topic("t", leaders=[NODE, NODE], epoch=2)))
    yield made
    made.close()


def txn(seq: int, txn: bool = True, pid: int = PID) -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE, producer_id=pid, producer_epoch=0, base_sequence=seq,
        is_transactional=txn,
    )  # fmt: skip
    builder.append(TS, None, b"v%d" % seq)
    return builder.build()


def params(*parts: tuple[TopicPartition, bytes]) -> ProduceParams:
    return replace(produce_params(*parts), transactional_id="tx")


async def test_an_unverified_write_is_refused_and_nothing_is_written(
    node: Node, coordinator: Coordinator
) -> None:
    coordinator.answer = (ErrorCode.INVALID_TXN_STATE, "not in the transaction")
    results = await node.produce.produce(params((T0, txn(0))))
    assert [r.error for r in results] == [ErrorCode.INVALID_TXN_STATE]
    assert coordinator.calls == [("tx", PID, 0, T0)]
    partition = node.replicas.partitions[T0]
    assert partition.log_end_offset == 0
    assert partition.first_unstable_offset() is None


async def test_a_verified_write_opens_the_transaction_and_later_ones_need_no_call(
    node: Node, coordinator: Coordinator
) -> None:
    first = await node.produce.produce(params((T0, txn(0))))
    second = await node.produce.produce(params((T0, txn(1))))
    assert [(r.error, r.base_offset) for r in first + second] == [
        (ErrorCode.NONE, 0),
        (ErrorCode.NONE, 1),
    ]
    assert len(coordinator.calls) == 1
    assert node.replicas.partitions[T0].first_unstable_offset() == 0


async def test_coordinator_unavailability_is_retriable_not_enough_replicas(
    node: Node, coordinator: Coordinator
) -> None:
    coordinator.answer = (ErrorCode.NOT_COORDINATOR, "moved")
    results = await node.produce.produce(params((T0, txn(0))))
    assert [r.error for r in results] == [ErrorCode.NOT_ENOUGH_REPLICAS]
    assert node.replicas.partitions[T0].log_end_offset == 0


async def test_a_verification_in_flight_holds_up_no_other_partition(
    node: Node, coordinator: Coordinator
) -> None:
    coordinator.gate.clear()
    waiting = asyncio.ensure_future(node.produce.produce(params((T0, txn(0)))))
    other = await node.produce.produce(params((T1, txn(0, txn=False, pid=PID + 1))))
    assert [r.error for r in other] == [ErrorCode.NONE]
    assert not waiting.done()
    assert node.replicas.partitions[T0].log_end_offset == 0
    coordinator.gate.set()
    assert [r.error for r in await waiting] == [ErrorCode.NONE]


async def test_a_marker_during_the_verification_voids_it(
    node: Node, coordinator: Coordinator
) -> None:
    coordinator.gate.clear()
    late = node.produce.append(params((T0, txn(0))))  # deferred: the verification started
    abort = build_end_txn_marker(EndTxnMarker(ControlRecordType.ABORT, 0), PID, 0, TS)
    marked = await node.produce.produce(
        replace(produce_params((T0, abort)), origin=AppendOrigin.COORDINATOR)
    )
    assert [r.error for r in marked] == [ErrorCode.NONE]
    coordinator.gate.set()
    assert [r.error for r in await node.produce.complete(late)] == [ErrorCode.INVALID_TXN_STATE]
    partition = node.replicas.partitions[T0]
    assert partition.log_end_offset == 1  # the marker only
    assert partition.first_unstable_offset() is None
