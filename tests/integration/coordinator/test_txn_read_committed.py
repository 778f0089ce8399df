"""read_committed on real processes (etcd, metadata, three storage nodes, two coordinators, a
gateway), transactions driven through the gateway's gRPC API: a read_committed fetch stops
before an open transaction (raw Fetch and FetchRecords, ListOffsets latest = the LSO), sees
the committed records once the commit marker is in, never the aborted ones (raw Fetch + the
shared AbortedFilter, and the gateway's FetchRecords), and a SIGKILLed and restarted storage
node keeps the LSO of the open transaction and the aborted transactions (its producer
snapshot and the .txnindex rebuilt by recovery), as does the follower elected when a
replicated partition's leader is killed (followers replay the same batches)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from test_transaction_coordinator import add, call, end, init, produce, txn_batch, wait_for
from txn_cluster import gateway_stub, txn_cluster

from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder, CompressionType
from riverlog.common.records.aborted import AbortedFilter
from riverlog.common.records.reader import iter_batches_records
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2, gateway_pb2_grpc

pytestmark = [pytest.mark.timeout(400), pytest.mark.slow]
E = ErrorCode
COMMITTED = common_pb2.READ_COMMITTED
UNCOMMITTED = common_pb2.READ_UNCOMMITTED


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with txn_cluster(Path(tmp_path_factory.mktemp("txn-rc"))) as local:
        yield local


@pytest.fixture(scope="module")
def gateway(cluster: LocalCluster) -> Iterator[gateway_pb2_grpc.GatewayStub]:
    with gateway_stub(cluster) as stub:
        yield stub


def plain_batch(*values: bytes) -> bytes:
    builder = BatchBuilder(CompressionType.NONE)
    for value in values:
        builder.append(1_700_000_000_000, None, value)
    return builder.build()


def raw_fetch(stub: gateway_pb2_grpc.GatewayStub, topic: str, level: int) -> Any:
    request = data_pb2.FetchRequest(
        max_wait_ms=0,
        max_bytes=1 << 20,
        isolation_level=level,  # type: ignore[arg-type]
        partitions=[data_pb2.FetchPartition(topic=topic, partition=0, fetch_offset=0)],
    )
    return call(stub, "Fetch", request).partitions[0]


def committed_values(stub: gateway_pb2_grpc.GatewayStub, topic: str) -> tuple[list[bytes], Any]:
    """What a read_committed reader of the raw Fetch keeps, with the partition's answer."""
    part = raw_fetch(stub, topic, COMMITTED)
    assert part.error_code == E.NONE, part
    aborted = AbortedFilter((a.producer_id, a.first_offset) for a in part.aborted_transactions)
    records = iter_batches_records(bytes(part.records), aborted=aborted)
    return [r.value for r in records if r.value is not None], part


def fetch_records(stub: gateway_pb2_grpc.GatewayStub, topic: str) -> Any:
    request = gateway_pb2.FetchRecordsRequest(
        topic=topic, partition=0, offset=0, max_wait_ms=0, isolation_level=COMMITTED
    )
    answer = call(stub, "FetchRecords", request)
    assert answer.error_code == E.NONE, answer
    return answer


def latest(stub: gateway_pb2_grpc.GatewayStub, topic: str, level: int) -> int:
    request = data_pb2.ListOffsetsRequest(
        isolation_level=level,  # type: ignore[arg-type]
        partitions=[
            data_pb2.ListOffsetsPartition(
                topic=topic, partition=0, spec=common_pb2.OFFSET_SPEC_LATEST
            )
        ],
    )
    [part] = call(stub, "ListOffsets", request).partitions
    assert part.error_code == E.NONE, part
    return int(part.offset)


def leader_of(stub: gateway_pb2_grpc.GatewayStub, topic: str) -> int:
    answer = call(stub, "GetMetadata", gateway_pb2.GetMetadataRequest(topics=[topic]))
    return int(answer.topics[0].partitions[0].leader)


def restart_leader(cluster: LocalCluster, stub: gateway_pb2_grpc.GatewayStub, topic: str) -> None:
    """SIGKILL the partition's only replica, start it again, wait until it serves again."""
    node = cluster.storage(leader_of(stub, topic))
    node.kill()
    node.restart(timeout=120)

    def serving() -> bool:
        try:
            return bool(raw_fetch(stub, topic, UNCOMMITTED).error_code == E.NONE)
        except grpc.RpcError:  # the gateway may still be reconnecting
            return False

    wait_for(serving, timeout_s=120, what=f"{topic} served again")


def test_read_committed_across_commit_abort_and_a_storage_restart(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub
) -> None:
    topic = unique_topic_name("rc")
    cluster.create_topic(topic, partitions=1, replication_factor=1)
    assert produce(gateway, topic, 0, plain_batch(b"p0", b"p1")).error_code == E.NONE  # 0-1

    # Transaction A opens at offset 2 and stays open.
    tid_a = "rc-a-" + topic
    a = init(gateway, tid_a)
    assert add(gateway, tid_a, a, topic, 0).error_code == E.NONE
    written = produce(gateway, topic, 0, txn_batch(a.producer_id, a.producer_epoch, 0, b"a"), tid_a)
    assert (written.error_code, written.base_offset) == (E.NONE, 2)  # 2-3

    # Transaction B writes 4-5 and aborts (its marker at 6).
    tid_b = "rc-b-" + topic
    b = init(gateway, tid_b)
    assert add(gateway, tid_b, b, topic, 0).error_code == E.NONE
    written = produce(gateway, topic, 0, txn_batch(b.producer_id, b.producer_epoch, 0, b"b"), tid_b)
    assert (written.error_code, written.base_offset) == (E.NONE, 4)
    assert end(gateway, tid_b, b.producer_id, b.producer_epoch, False).error_code == E.NONE
    wait_for(lambda: raw_fetch(gateway, topic, UNCOMMITTED).high_watermark == 7, what="abort")

    def open_a_holds_the_lso() -> None:
        values, part = committed_values(gateway, topic)
        assert values == [b"p0", b"p1"]
        assert (part.last_stable_offset, part.high_watermark) == (2, 7)
        records = fetch_records(gateway, topic)
        assert [r.value for r in records.records] == [b"p0", b"p1"]
        assert (records.last_stable_offset, records.next_offset) == (2, 2)
        assert latest(gateway, topic, COMMITTED) == 2
        assert latest(gateway, topic, UNCOMMITTED) == 7

    open_a_holds_the_lso()
    restart_leader(cluster, gateway, topic)  # the open transaction survives a kill -9
    open_a_holds_the_lso()

    # A commits: its records appear, B's never do.
    ended = end(gateway, tid_a, a.producer_id, a.producer_epoch, True)
    assert ended.error_code == E.NONE
    wait_for(lambda: latest(gateway, topic, COMMITTED) == 8, what="the LSO past A's marker")

    def committed_and_aborted() -> None:
        values, part = committed_values(gateway, topic)
        assert values == [b"p0", b"p1", b"a-0", b"a-1"]
        assert [(t.producer_id, t.first_offset) for t in part.aborted_transactions] == [
            (b.producer_id, 4)
        ]
        assert (part.last_stable_offset, part.high_watermark) == (8, 8)
        records = fetch_records(gateway, topic)
        assert [r.value for r in records.records] == [b"p0", b"p1", b"a-0", b"a-1"]
        assert (records.last_stable_offset, records.next_offset) == (8, 8)
        everything = raw_fetch(gateway, topic, UNCOMMITTED)
        assert list(everything.aborted_transactions) == []  # read_uncommitted: not needed
        uncommitted = [r.value for r in iter_batches_records(bytes(everything.records))]
        assert b"b-0" in uncommitted  # the aborted data is there, only filtered

    committed_and_aborted()
    restart_leader(cluster, gateway, topic)  # the .txnindex rebuilt by recovery
    committed_and_aborted()


def test_a_new_leader_has_the_same_lso_and_aborted_transactions(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub
) -> None:
    """Followers replay the leader's batches, so the one elected after a kill -9 answers
    read_committed as the old leader did."""
    topic = unique_topic_name("rc-failover")
    cluster.create_topic(topic, partitions=1, replication_factor=3, configs={
        "min.insync.replicas": "2"
    })  # fmt: skip
    assert produce(gateway, topic, 0, plain_batch(b"p0")).error_code == E.NONE  # 0
    tid_a, tid_b = "rcf-a-" + topic, "rcf-b-" + topic
    a, b = init(gateway, tid_a), init(gateway, tid_b)
    assert add(gateway, tid_b, b, topic, 0).error_code == E.NONE
    written = produce(gateway, topic, 0, txn_batch(b.producer_id, b.producer_epoch, 0, b"b"), tid_b)
    assert (written.error_code, written.base_offset) == (E.NONE, 1)
    assert add(gateway, tid_a, a, topic, 0).error_code == E.NONE
    written = produce(gateway, topic, 0, txn_batch(a.producer_id, a.producer_epoch, 0, b"a"), tid_a)
    assert (written.error_code, written.base_offset) == (E.NONE, 3)  # b at 1-2, a at 3-4
    assert end(gateway, tid_b, b.producer_id, b.producer_epoch, False).error_code == E.NONE
    wait_for(lambda: raw_fetch(gateway, topic, UNCOMMITTED).high_watermark == 6, what="abort")

    def as_before() -> bool:
        values, part = committed_values(gateway, topic)
        aborted = [(t.producer_id, t.first_offset) for t in part.aborted_transactions]
        return (
            values == [b"p0"]
            and part.last_stable_offset == 3  # b ended (marker at 5), a is open from 3
            and aborted == [(b.producer_id, 1)]  # b's data is in the records: dropped
        )

    assert as_before()
    old = leader_of(gateway, topic)
    cluster.storage(old).kill()
    wait_for(lambda: leader_of(gateway, topic) not in (old, -1), timeout_s=120, what="election")

    def serving_as_before() -> bool:
        try:
            return as_before()
        except (grpc.RpcError, AssertionError):
            return False

    wait_for(serving_as_before, timeout_s=120, what="the new leader's read_committed answer")
    assert end(gateway, tid_a, a.producer_id, a.producer_epoch, True).error_code == E.NONE

    def committed() -> bool:
        values, part = committed_values(gateway, topic)
        aborted = [(t.producer_id, t.first_offset) for t in part.aborted_transactions]
        return values == [b"p0", b"a-0", b"a-1"] and aborted == [(b.producer_id, 1)]

    wait_for(committed, timeout_s=120, what="a committed on the new leader")
    cluster.storage(old).restart(timeout=120)
