"""The transaction coordinator on real processes (etcd, metadata, three storage nodes, two
coordinators, a gateway), driven through the gateway's gRPC API as any client would: a
transaction commits and its partitions get commit markers with the bumped epoch; the next one
aborts; a late write of an ended transaction is fenced; a new session fences the old one and
aborts what it left open; describe and list (SDK and CLI) show it; bad requests change nothing;
the torn-transaction case (a stale EndTxn, or a stale marker sent straight to the partition's
storage node, arriving while the next transaction is open) is refused and leaves the open one
whole and committable.

read_committed fetches are in test_txn_read_committed.py; TxnOffsetCommit in
test_txn_offset_commit.py; the SDK producer in test_transactional_clients.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc
import pytest
from txn_cluster import gateway_stub, wait_for

from riverlog.client import AdminClient
from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.records.control import ControlRecordType, parse_end_txn_marker
from riverlog.common.records.header import iter_batches
from riverlog.common.records.reader import iter_batches_records
from riverlog.common.rpc.channel import CLIENT_ID_KEY, sync_channel
from riverlog.v1 import (
    common_pb2,
    data_pb2,
    gateway_pb2,
    gateway_pb2_grpc,
    storage_pb2,
    storage_pb2_grpc,
)
from riverlog.v1 import transactions_pb2 as pb

pytestmark = pytest.mark.timeout(300)
E = ErrorCode
T = TypeVar("T")
METADATA = ((CLIENT_ID_KEY, "txn-integration-test"),)
TIMEOUT_S = 30.0


@pytest.fixture(scope="module")
def cluster(shared_txn_cluster: LocalCluster) -> LocalCluster:
    """The transaction cluster this module shares (conftest.py): names are the module's own."""
    return shared_txn_cluster


@pytest.fixture(scope="module")
def gateway(cluster: LocalCluster) -> Iterator[gateway_pb2_grpc.GatewayStub]:
    with gateway_stub(cluster) as stub:
        yield stub


def call(stub: gateway_pb2_grpc.GatewayStub, method: str, request: Any) -> Any:
    return getattr(stub, method)(request, timeout=TIMEOUT_S, metadata=METADATA)


def init(stub: gateway_pb2_grpc.GatewayStub, tid: str) -> pb.InitProducerIdResponse:
    """InitProducerId, retried while the coordinator fences and aborts an old session."""

    def once() -> pb.InitProducerIdResponse | None:
        answer = call(stub, "InitProducerId", pb.InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=60_000
        ))  # fmt: skip
        if answer.error_code == E.CONCURRENT_TRANSACTIONS:
            return None
        assert answer.error_code == E.NONE, answer
        return answer  # type: ignore[no-any-return]

    return wait_for(once, what=f"InitProducerId of {tid}")


def txn_batch(pid: int, epoch: int, seq: int, tag: bytes, count: int = 2) -> bytes:
    builder = BatchBuilder(
        CompressionType.NONE,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=True,
    )
    for i in range(count):
        builder.append(1_700_000_000_000, None, tag + b"-%d" % i)
    return builder.build()


def produce(
    stub: gateway_pb2_grpc.GatewayStub, topic: str, partition: int, records: bytes, tid: str = ""
) -> Any:
    """A raw Produce; transactional batches carry their `tid` (the leader verifies them with
    its coordinator, KIP-890)."""
    request = data_pb2.ProduceRequest(
        acks=common_pb2.ACKS_ALL,
        timeout_ms=int(TIMEOUT_S * 1000),
        transactional_id=tid,
        partitions=[data_pb2.ProducePartition(topic=topic, partition=partition, records=records)],
    )
    return call(stub, "Produce", request).partitions[0]


def batches(stub: gateway_pb2_grpc.GatewayStub, topic: str, partition: int) -> list[Any]:
    """Every batch header of the partition, with its bytes (markers included)."""
    request = data_pb2.FetchRequest(
        max_wait_ms=0,
        max_bytes=1 << 20,
        partitions=[
            data_pb2.FetchPartition(
                topic=topic, partition=partition, fetch_offset=0, partition_max_bytes=1 << 20
            )
        ],
    )
    part = call(stub, "Fetch", request).partitions[0]
    assert part.error_code == E.NONE, part
    data = bytes(part.records)
    return [(h, data[p : p + h.size]) for p, h in _positions(data)]


def _positions(data: bytes) -> list[tuple[int, Any]]:
    out, position = [], 0
    for header in iter_batches(data):
        out.append((position, header))
        position += header.size
    return out


def markers(stub: gateway_pb2_grpc.GatewayStub, topic: str, partition: int) -> list[Any]:
    return [
        (h.producer_epoch, parse_end_txn_marker(raw).control_type)
        for h, raw in batches(stub, topic, partition)
        if h.is_control
    ]


def describe(stub: gateway_pb2_grpc.GatewayStub, tid: str) -> pb.TransactionDescription:
    answer = call(stub, "DescribeTransactions", pb.DescribeTransactionsRequest(
        transactional_ids=[tid]
    ))  # fmt: skip
    [row] = answer.transactions
    return row  # type: ignore[no-any-return]


def in_state(stub: gateway_pb2_grpc.GatewayStub, tid: str, state: str) -> Callable[[], bool]:
    return lambda: describe(stub, tid).transaction_state == state


@pytest.fixture(scope="module")
def topic(cluster: LocalCluster) -> str:
    name = unique_topic_name("txn")
    cluster.create_topic(name, partitions=2, replication_factor=3, configs={
        "min.insync.replicas": "2"
    })  # fmt: skip
    return name


def add(
    stub: gateway_pb2_grpc.GatewayStub, tid: str, producer: Any, topic: str, *parts: int
) -> Any:
    return call(stub, "AddPartitionsToTxn", pb.AddPartitionsToTxnRequest(
        transactional_id=tid,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        topics=[pb.TxnTopic(name=topic, partitions=list(parts))],
    ))  # fmt: skip


def end(stub: gateway_pb2_grpc.GatewayStub, tid: str, pid: int, epoch: int, commit: bool) -> Any:
    return call(stub, "EndTxn", pb.EndTxnRequest(
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit
    ))  # fmt: skip


def test_commit_then_abort_mark_every_partition_and_fence_late_writes(
    gateway: gateway_pb2_grpc.GatewayStub, topic: str
) -> None:
    tid = "orders-" + topic
    producer = init(gateway, tid)
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert add(gateway, tid, producer, topic, 0, 1).error_code == E.NONE
    assert describe(gateway, tid).transaction_state == "Ongoing"
    for partition in (0, 1):
        written = produce(gateway, topic, partition, txn_batch(pid, epoch, 0, b"one"), tid)
        assert written.error_code == E.NONE, written

    ended = end(gateway, tid, pid, epoch, True)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (E.NONE, pid, epoch + 1)
    wait_for(in_state(gateway, tid, "CompleteCommit"), what="CompleteCommit")
    for partition in (0, 1):
        assert markers(gateway, topic, partition) == [(epoch + 1, ControlRecordType.COMMIT)]
    retried = end(gateway, tid, pid, epoch, True)  # the answer was lost: the same again
    assert (retried.error_code, retried.producer_epoch) == (E.NONE, epoch + 1)

    # The next transaction runs with the bumped epoch; a late batch of the first is fenced.
    late = produce(gateway, topic, 0, txn_batch(pid, epoch, 2, b"late"), tid)
    assert late.error_code == E.INVALID_PRODUCER_EPOCH, late
    second = pb.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch + 1)
    assert add(gateway, tid, second, topic, 0).error_code == E.NONE
    assert (
        produce(gateway, topic, 0, txn_batch(pid, epoch + 1, 0, b"two"), tid).error_code == E.NONE
    )
    aborted = end(gateway, tid, pid, epoch + 1, False)
    assert (aborted.error_code, aborted.producer_epoch) == (E.NONE, epoch + 2)
    wait_for(in_state(gateway, tid, "CompleteAbort"), what="CompleteAbort")
    assert markers(gateway, topic, 0) == [
        (epoch + 1, ControlRecordType.COMMIT),
        (epoch + 2, ControlRecordType.ABORT),
    ]
    assert markers(gateway, topic, 1) == [(epoch + 1, ControlRecordType.COMMIT)]  # not in it
    stale = end(gateway, tid, pid, epoch, True)  # the first end, far too late
    assert stale.error_code == E.PRODUCER_FENCED


def test_a_new_session_fences_the_old_one_and_aborts_what_it_left_open(
    gateway: gateway_pb2_grpc.GatewayStub, topic: str
) -> None:
    tid = "fenced-" + topic
    old = init(gateway, tid)
    assert add(gateway, tid, old, topic, 1).error_code == E.NONE
    ok = produce(
        gateway, topic, 1, txn_batch(old.producer_id, old.producer_epoch, 0, b"zombie"), tid
    )
    assert ok.error_code == E.NONE

    new = init(gateway, tid)  # CONCURRENT_TRANSACTIONS until the old one is aborted
    assert new.producer_id == old.producer_id and new.producer_epoch > old.producer_epoch + 1
    assert describe(gateway, tid).transaction_state == "Empty"  # the new session's, ready
    assert (old.producer_epoch + 1, ControlRecordType.ABORT) in markers(gateway, topic, 1)
    zombie = end(gateway, tid, old.producer_id, old.producer_epoch, True)
    assert zombie.error_code == E.PRODUCER_FENCED
    late = produce(gateway, topic, 1, txn_batch(old.producer_id, old.producer_epoch, 2, b"z"), tid)
    assert late.error_code == E.INVALID_PRODUCER_EPOCH


def test_bad_requests_get_kafkas_errors_and_change_nothing(
    gateway: gateway_pb2_grpc.GatewayStub, topic: str
) -> None:
    tid = "bad-" + topic
    producer = init(gateway, tid)
    timeout = call(gateway, "InitProducerId", pb.InitProducerIdRequest(
        transactional_id=tid + "-x", transaction_timeout_ms=10**9
    ))  # fmt: skip
    assert timeout.error_code == E.INVALID_TRANSACTION_TIMEOUT
    commit_nothing = end(gateway, tid, producer.producer_id, producer.producer_epoch, True)
    assert commit_nothing.error_code == E.INVALID_TXN_STATE
    wrong_id = end(gateway, tid, producer.producer_id + 1, producer.producer_epoch, False)
    assert wrong_id.error_code == E.INVALID_PRODUCER_ID_MAPPING
    no_partitions = call(gateway, "AddPartitionsToTxn", pb.AddPartitionsToTxnRequest(
        transactional_id=tid,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
    ))  # fmt: skip
    assert no_partitions.error_code == E.INVALID_REQUEST
    assert describe(gateway, tid).transaction_state == "Empty"
    unknown = describe(gateway, "never-" + topic)
    assert unknown.error_code == E.TRANSACTIONAL_ID_NOT_FOUND


def test_admin_and_cli_list_and_describe(cluster: LocalCluster, topic: str) -> None:
    tid = "orders-" + topic  # ended in the first test
    with AdminClient(bootstrap_servers=cluster.gateway_address) as admin:
        listed = wait_for(
            lambda: [t for t in admin.list_transactions() if t.transactional_id == tid],
            what="the listing",
        )
        assert listed[0].state in ("CompleteAbort", "CompleteCommit", "Empty")
        found = admin.describe_transactions([tid])[tid]
        assert not isinstance(found, Exception) and found.state == listed[0].state
    run = subprocess.run(
        [sys.executable, "-m", "riverlog.cli.main", "transactions", "list", "--json",
         "--bootstrap", cluster.gateway_address],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert tid in {row["transactional_id"] for row in json.loads(run.stdout)}
    missing = subprocess.run(
        [sys.executable, "-m", "riverlog.cli.main", "transactions", "describe",
         "--transactional-id", "never-" + topic, "--bootstrap", cluster.gateway_address],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert missing.returncode != 0 and "TRANSACTIONAL_ID_NOT_FOUND" in missing.stderr


def test_grpc_errors_never_escape(gateway: gateway_pb2_grpc.GatewayStub) -> None:
    """An empty transactional id is refused in the answer, not as a broken call."""
    try:
        answer = call(gateway, "EndTxn", pb.EndTxnRequest())
    except grpc.RpcError as exc:  # pragma: no cover - the assertion below explains
        raise AssertionError(f"EndTxn raised {exc.code()}") from exc
    assert answer.error_code != E.NONE


def partition_state(stub: gateway_pb2_grpc.GatewayStub, topic: str, partition: int) -> Any:
    """The partition's log end offset, high watermark and LSO (a read_committed Fetch)."""
    request = data_pb2.FetchRequest(
        max_wait_ms=0,
        max_bytes=1 << 20,
        isolation_level=common_pb2.READ_COMMITTED,
        partitions=[data_pb2.FetchPartition(topic=topic, partition=partition, fetch_offset=0)],
    )
    part = call(stub, "Fetch", request).partitions[0]
    assert part.error_code == E.NONE, part
    return part


def test_leaders_verify_transactional_writes_with_the_coordinator(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub
) -> None:
    """KIP-890 part 1: a transactional write to a partition not in the transaction is refused
    with INVALID_TXN_STATE and writes nothing; once added it is written; a write of an ended
    transaction (Jepsen's hanging transaction) is refused and never holds the LSO."""
    topic = unique_topic_name("verify")
    cluster.create_topic(topic, partitions=2, replication_factor=3, configs={
        "min.insync.replicas": "2"
    })  # fmt: skip
    tid = "verify-" + topic
    producer = init(gateway, tid)
    pid, epoch = producer.producer_id, producer.producer_epoch
    before = partition_state(gateway, topic, 0)

    refused = produce(gateway, topic, 0, txn_batch(pid, epoch, 0, b"unadded"), tid)
    assert refused.error_code == E.INVALID_TXN_STATE, refused
    after = partition_state(gateway, topic, 0)
    assert after.log_end_offset == before.log_end_offset
    assert after.last_stable_offset == after.high_watermark == before.high_watermark

    assert add(gateway, tid, producer, topic, 0).error_code == E.NONE
    written = produce(gateway, topic, 0, txn_batch(pid, epoch, 0, b"added"), tid)
    assert (written.error_code, written.base_offset) == (E.NONE, before.log_end_offset)
    more = produce(gateway, topic, 0, txn_batch(pid, epoch, 2, b"more"), tid)  # no call
    assert more.error_code == E.NONE, more
    assert partition_state(gateway, topic, 0).last_stable_offset == before.log_end_offset

    assert end(gateway, tid, pid, epoch, True).error_code == E.NONE
    wait_for(in_state(gateway, tid, "CompleteCommit"), what="CompleteCommit")
    ended = partition_state(gateway, topic, 0)
    assert ended.last_stable_offset == ended.high_watermark == ended.log_end_offset

    # The hanging transaction: a late first write of the ended transaction at a partition it
    # never touched. Without verification it would open a transaction nobody ends.
    hanging = produce(gateway, topic, 1, txn_batch(pid, epoch, 0, b"hanging"), tid)
    assert hanging.error_code == E.INVALID_PRODUCER_EPOCH, hanging
    late = partition_state(gateway, topic, 1)
    assert late.log_end_offset == 0 and late.last_stable_offset == late.high_watermark


def leader_address(cluster: LocalCluster, stub: gateway_pb2_grpc.GatewayStub, topic: str) -> str:
    answer = call(stub, "GetMetadata", gateway_pb2.GetMetadataRequest(topics=[topic]))
    leader = int(answer.topics[0].partitions[0].leader)
    address = cluster.storage(leader).address
    assert address is not None
    return address


def test_a_stale_end_or_marker_cannot_end_the_next_transaction(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub
) -> None:
    """Jepsen's torn transaction: transaction 1 commits (marker at epoch E+1), transaction 2 is
    open at E+1 with data in the partition; then transaction 1's EndTxn (epoch E) arrives late
    at the coordinator, and a marker of epoch E reaches the partition's storage node directly
    (as a delayed WriteTxnMarkers would). Both are refused, and transaction 1's own marker
    replayed is a duplicate; nothing is written, transaction 2 stays open and unread, and then
    commits whole."""
    topic = unique_topic_name("torn")
    cluster.create_topic(topic, partitions=1, replication_factor=3, configs={
        "min.insync.replicas": "2"
    })  # fmt: skip
    tid = "torn-" + topic
    first = init(gateway, tid)
    pid, epoch = first.producer_id, first.producer_epoch
    assert add(gateway, tid, first, topic, 0).error_code == E.NONE
    assert produce(gateway, topic, 0, txn_batch(pid, epoch, 0, b"one"), tid).error_code == E.NONE
    assert end(gateway, tid, pid, epoch, True).error_code == E.NONE
    wait_for(in_state(gateway, tid, "CompleteCommit"), what="CompleteCommit")
    [(header, raw_marker)] = [(h, raw) for h, raw in batches(gateway, topic, 0) if h.is_control]
    coordinator_epoch = parse_end_txn_marker(raw_marker).coordinator_epoch
    first_marker_offset = header.base_offset

    second = pb.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch + 1)
    assert add(gateway, tid, second, topic, 0).error_code == E.NONE
    two = produce(gateway, topic, 0, txn_batch(pid, epoch + 1, 0, b"two"), tid)
    assert two.error_code == E.NONE, two
    before = partition_state(gateway, topic, 0)
    assert before.last_stable_offset == two.base_offset  # transaction 2 holds the LSO

    for committed in (True, False):  # the late end of transaction 1, either way
        stale = end(gateway, tid, pid, epoch, committed)
        assert stale.error_code == E.PRODUCER_FENCED, stale
    row = describe(gateway, tid)
    assert (row.transaction_state, row.producer_epoch) == ("Ongoing", epoch + 1)
    assert [(t.name, list(t.partitions)) for t in row.topics] == [(topic, [0])]

    channel = sync_channel(leader_address(cluster, gateway, topic))
    try:
        storage = storage_pb2_grpc.StorageServiceStub(channel)
        for committed in (True, False):
            request = storage_pb2.WriteTxnMarkersRequest(
                producer_id=pid,
                producer_epoch=epoch,  # older than the partition's (E+1, from marker 1)
                committed=committed,
                coordinator_epoch=coordinator_epoch,
                topic=topic,
                partition=0,
                timeout_ms=10_000,
            )
            refused = storage.WriteTxnMarkers(request, timeout=TIMEOUT_S)
            assert refused.error_code == E.INVALID_PRODUCER_EPOCH, refused
            # Transaction 1's own marker (epoch E+1, the epoch transaction 2 now writes with)
            # replayed: a duplicate, answered with its first offset, never a second marker
            # that would end transaction 2 early.
            request.producer_epoch = epoch + 1
            replayed = storage.WriteTxnMarkers(request, timeout=TIMEOUT_S)
            assert (replayed.error_code, replayed.offset) == (E.NONE, first_marker_offset)
    finally:
        channel.close()
    after = partition_state(gateway, topic, 0)
    assert (after.log_end_offset, after.last_stable_offset) == (
        before.log_end_offset, before.last_stable_offset,
    )  # fmt: skip
    assert markers(gateway, topic, 0) == [(epoch + 1, ControlRecordType.COMMIT)]

    ended = end(gateway, tid, pid, epoch + 1, True)  # transaction 2 is untouched: it commits
    assert (ended.error_code, ended.producer_epoch) == (E.NONE, epoch + 2)
    wait_for(in_state(gateway, tid, "CompleteCommit"), what="CompleteCommit of transaction 2")
    assert markers(gateway, topic, 0) == [
        (epoch + 1, ControlRecordType.COMMIT),
        (epoch + 2, ControlRecordType.COMMIT),
    ]
    done = partition_state(gateway, topic, 0)
    assert done.last_stable_offset == done.high_watermark == done.log_end_offset
    values = [r.value for r in iter_batches_records(bytes(done.records)) if r.value is not None]
    assert values == [b"one-0", b"one-1", b"two-0", b"two-1"]
