"""TxnOffsetCommit on real processes (etcd, metadata, three storage nodes, two coordinators, a
gateway), driven through the gateway's gRPC API (decision 0031): a transaction's offsets are
in `__consumer_offsets` as the producer's transactional batch but invisible to OffsetFetch
(UNSTABLE_OFFSET_COMMIT under require_stable) until EndTxn commits, an aborted transaction's
offsets never appear, and after the group's coordinator is SIGKILLed and restarted the
committed ones are still there, the aborted one is not, and the open one is pending until its
commit, whose marker reaches the partition's current owner. Also the operator's abort of a
hanging transaction (AbortTransaction) and AddPartitionsToTxn's verify_only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from txn_cluster import gateway_stub, txn_cluster, wait_for

from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.cluster.image import OFFSETS_TOPIC
from riverlog.common.errors import ErrorCode
from riverlog.common.records.control import ControlRecordType, parse_end_txn_marker
from riverlog.common.records.header import iter_batches
from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.v1 import coordinator_pb2 as cpb
from riverlog.v1 import data_pb2, gateway_pb2_grpc
from riverlog.v1 import transactions_pb2 as pb

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]
E = ErrorCode
T = TypeVar("T")
METADATA = ((CLIENT_ID_KEY, "txn-offsets-integration-test"),)
TIMEOUT_S = 30.0
RETRIABLE = {
    E.NOT_COORDINATOR,
    E.COORDINATOR_NOT_AVAILABLE,
    E.COORDINATOR_LOAD_IN_PROGRESS,
    E.CONCURRENT_TRANSACTIONS,
    E.REQUEST_TIMED_OUT,
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with txn_cluster(Path(tmp_path_factory.mktemp("txn-offsets"))) as local:
        yield local


@pytest.fixture(scope="module")
def gateway(cluster: LocalCluster) -> Iterator[gateway_pb2_grpc.GatewayStub]:
    with gateway_stub(cluster) as stub:
        yield stub


def call(stub: gateway_pb2_grpc.GatewayStub, method: str, request: Any) -> Any:
    return getattr(stub, method)(request, timeout=TIMEOUT_S, metadata=METADATA)


def retried(stub: gateway_pb2_grpc.GatewayStub, method: str, request: Any) -> Any:
    """The call, again while it answers a retriable error (a coordinator moving or loading)."""

    def once() -> Any:
        try:
            answer = call(stub, method, request)
        except grpc.RpcError:
            return None
        return None if answer.error_code in RETRIABLE else answer

    return wait_for(once, what=method)


def init(stub: gateway_pb2_grpc.GatewayStub, tid: str) -> tuple[int, int]:
    answer = retried(stub, "InitProducerId", pb.InitProducerIdRequest(
        transactional_id=tid, transaction_timeout_ms=300_000
    ))  # fmt: skip
    assert answer.error_code == E.NONE, answer
    return answer.producer_id, answer.producer_epoch


def add_offsets(
    stub: gateway_pb2_grpc.GatewayStub, tid: str, p: tuple[int, int], group: str
) -> None:
    answer = retried(stub, "AddOffsetsToTxn", pb.AddOffsetsToTxnRequest(
        transactional_id=tid, producer_id=p[0], producer_epoch=p[1], group_id=group
    ))  # fmt: skip
    assert answer.error_code == E.NONE, answer


def txn_commit(
    stub: gateway_pb2_grpc.GatewayStub, tid: str, p: tuple[int, int], group: str, topic: str,
    offset: int,
) -> list[int]:  # fmt: skip
    answer = retried(stub, "TxnOffsetCommit", cpb.TxnOffsetCommitRequest(
        transactional_id=tid, group_id=group, producer_id=p[0], producer_epoch=p[1],
        generation_id=-1,
        topics=[cpb.OffsetCommitTopic(name=topic, partitions=[
            cpb.OffsetCommitPartition(partition=0, committed_offset=offset)
        ])],
    ))  # fmt: skip
    return [part.error_code for t in answer.topics for part in t.partitions]


def end(
    stub: gateway_pb2_grpc.GatewayStub, tid: str, p: tuple[int, int], commit: bool
) -> tuple[int, int]:
    answer = retried(stub, "EndTxn", pb.EndTxnRequest(
        transactional_id=tid, producer_id=p[0], producer_epoch=p[1], committed=commit
    ))  # fmt: skip
    assert answer.error_code == E.NONE, answer
    return answer.producer_id, answer.producer_epoch


def state(stub: gateway_pb2_grpc.GatewayStub, tid: str) -> str:
    answer = call(stub, "DescribeTransactions", pb.DescribeTransactionsRequest(
        transactional_ids=[tid]
    ))  # fmt: skip
    return str(answer.transactions[0].transaction_state)


def committed(
    stub: gateway_pb2_grpc.GatewayStub, group: str, topic: str, stable: bool = False
) -> tuple[int, int]:
    """(error code, offset) of the group's partition 0 of `topic`."""
    answer = retried(stub, "OffsetFetch", cpb.OffsetFetchRequest(
        group_id=group, topics=[cpb.OffsetFetchTopic(name=topic, partitions=[0])],
        require_stable=stable,
    ))  # fmt: skip
    [part] = answer.topics[0].partitions
    return part.error_code, part.committed_offset


def owner(stub: gateway_pb2_grpc.GatewayStub, group: str) -> tuple[int, int]:
    """(coordinator node id, __consumer_offsets partition) of the group."""
    answer = call(stub, "FindCoordinator", cpb.FindCoordinatorRequest(keys=[group]))
    [found] = answer.coordinators
    return found.node_id, found.partition


def offsets_markers(stub: gateway_pb2_grpc.GatewayStub, partition: int, pid: int) -> list[Any]:
    """The producer's markers, and whether it wrote a transactional batch, in the partition."""
    request = data_pb2.FetchRequest(max_wait_ms=0, max_bytes=1 << 22, partitions=[
        data_pb2.FetchPartition(topic=OFFSETS_TOPIC, partition=partition, fetch_offset=0,
                                partition_max_bytes=1 << 22)
    ])  # fmt: skip
    part = call(stub, "Fetch", request).partitions[0]
    assert part.error_code == E.NONE, part
    data, position, out = bytes(part.records), 0, []
    for header in iter_batches(data):
        if header.producer_id == pid:
            if header.is_control:
                marker = parse_end_txn_marker(data[position : position + header.size])
                out.append((header.producer_epoch, marker.control_type))
            elif header.is_transactional:
                out.append((header.producer_epoch, "data"))
        position += header.size
    return out


def test_txn_offsets_count_on_commit_only_and_survive_a_sigkilled_coordinator(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub
) -> None:
    topic = unique_topic_name("txnoff")
    group, tid = "copier-" + topic, "copier-tx-" + topic
    p = init(gateway, tid)

    # 1. committed: invisible (unstable) until EndTxn commit, then visible
    add_offsets(gateway, tid, p, group)
    assert txn_commit(gateway, tid, p, group, topic, 42) == [E.NONE]
    assert committed(gateway, group, topic) == (E.NONE, -1)
    assert committed(gateway, group, topic, stable=True)[0] == E.UNSTABLE_OFFSET_COMMIT
    p1 = end(gateway, tid, p, True)
    wait_for(lambda: state(gateway, tid) == "CompleteCommit", what="CompleteCommit")
    assert committed(gateway, group, topic, stable=True) == (E.NONE, 42)

    # 2. aborted: never visible
    add_offsets(gateway, tid, p1, group)
    assert txn_commit(gateway, tid, p1, group, topic, 99) == [E.NONE]
    p2 = end(gateway, tid, p1, False)
    wait_for(lambda: state(gateway, tid) == "CompleteAbort", what="CompleteAbort")
    assert committed(gateway, group, topic, stable=True) == (E.NONE, 42)

    # the offsets partition holds the producer's batches and both markers, bumped epochs
    node_id, partition = owner(gateway, group)
    assert offsets_markers(gateway, partition, p[0]) == [
        (p[1], "data"),
        (p1[1], ControlRecordType.COMMIT),
        (p1[1], "data"),
        (p2[1], ControlRecordType.ABORT),
    ]

    # 3. open, then the group's coordinator is SIGKILLed and restarted
    add_offsets(gateway, tid, p2, group)
    assert txn_commit(gateway, tid, p2, group, topic, 77) == [E.NONE]
    process = cluster.coordinator(node_id)
    process.kill()
    process.restart()
    # loaded again (by it or by the other instance): committed there, aborted and open not
    assert committed(gateway, group, topic) == (E.NONE, 42)
    wait_for(
        lambda: committed(gateway, group, topic, stable=True)[0] == E.UNSTABLE_OFFSET_COMMIT,
        what="the open transaction's offsets pending after the load",
    )
    # the open transaction commits: its marker reaches the partition's current owner
    p3 = end(gateway, tid, p2, True)
    wait_for(lambda: state(gateway, tid) == "CompleteCommit", what="CompleteCommit after kill")
    assert committed(gateway, group, topic, stable=True) == (E.NONE, 77)

    # 4. the group's partition moves: its owner is SIGKILLed and stays down while a
    # transaction is open; the other instance takes the partition and gets the marker
    add_offsets(gateway, tid, p3, group)
    assert txn_commit(gateway, tid, p3, group, topic, 88) == [E.NONE]
    first, _ = owner(gateway, group)
    down = cluster.coordinator(first)
    down.kill()
    try:
        wait_for(lambda: owner(gateway, group)[0] not in (first, -1), what="the partition moving")
        assert committed(gateway, group, topic) == (E.NONE, 77)
        end(gateway, tid, p3, True)
        wait_for(lambda: state(gateway, tid) == "CompleteCommit", what="CompleteCommit moved")
        assert committed(gateway, group, topic, stable=True) == (E.NONE, 88)
    finally:
        down.restart()


def test_an_operator_aborts_a_hanging_transaction_and_its_offsets_are_dropped(
    gateway: gateway_pb2_grpc.GatewayStub,
) -> None:
    topic = unique_topic_name("hang")
    group, tid = "hang-" + topic, "hang-tx-" + topic
    init(gateway, tid)
    p = init(gateway, tid)  # a second session: epoch 1, so epoch 0 is a fenced one
    # KIP-890: offsets only for a group added to the producer's ongoing transaction, at its epoch
    assert txn_commit(gateway, tid, p, group, topic, 5) == [E.INVALID_TXN_STATE]
    add_offsets(gateway, tid, p, group)
    assert txn_commit(gateway, tid, (p[0], p[1] - 1), group, topic, 5) == [E.PRODUCER_FENCED]
    assert committed(gateway, group, topic, stable=True) == (E.NONE, -1)  # nothing pending
    assert txn_commit(gateway, tid, p, group, topic, 5) == [E.NONE]
    # KIP-890 part 1: the offsets partition is in the ongoing transaction, a topic is not
    verify = pb.AddPartitionsToTxnRequest(
        transactional_id=tid, producer_id=p[0], producer_epoch=p[1], verify_only=True,
        topics=[pb.TxnTopic(name=OFFSETS_TOPIC, partitions=[owner(gateway, group)[1]])],
    )  # fmt: skip
    assert call(gateway, "AddPartitionsToTxn", verify).error_code == E.NONE
    verify.topics[0].name, verify.topics[0].partitions[0] = topic, 0
    assert call(gateway, "AddPartitionsToTxn", verify).error_code == E.INVALID_TXN_STATE
    assert state(gateway, tid) == "Ongoing"  # verify_only added nothing

    aborted = retried(
        gateway, "AbortTransaction", cpb.AbortTransactionRequest(transactional_id=tid)
    )
    assert aborted.error_code == E.NONE, aborted
    assert aborted.previous_state == "Ongoing"
    assert (aborted.producer_id, aborted.producer_epoch) == (p[0], p[1] + 1)
    wait_for(lambda: state(gateway, tid) == "CompleteAbort", what="the operator's abort")
    assert committed(gateway, group, topic, stable=True) == (E.NONE, -1)
    # the fenced producer's commit is refused
    fenced = call(gateway, "EndTxn", pb.EndTxnRequest(
        transactional_id=tid, producer_id=p[0], producer_epoch=p[1], committed=True
    ))  # fmt: skip
    assert fenced.error_code == E.PRODUCER_FENCED
    again = call(gateway, "AbortTransaction", cpb.AbortTransactionRequest(transactional_id=tid))
    assert (again.error_code, again.previous_state) == (E.NONE, "CompleteAbort")
    unknown = call(gateway, "AbortTransaction", cpb.AbortTransactionRequest(
        transactional_id="never-" + topic
    ))  # fmt: skip
    assert unknown.error_code == E.TRANSACTIONAL_ID_NOT_FOUND
