"""The SDK's transactional producer and read_committed consumer on real processes (etcd,
metadata, three storage nodes, two coordinators, a gateway): a committed transaction over
several partitions is seen whole, an aborted one never by read_committed readers (markers in
the log either way), a second producer with the same transactional.id fences the first, whose
later calls fail fatally and whose late writes are refused; offsets sent with a transaction;
the README's consume-transform-produce loop copies a topic exactly once across a copier that
crashes holding an open transaction; the CLI's abort, read_committed consume and lag.

The SDK's tests run against both SDK flavours, the sync clients and the asyncio ones (the `sdk`
fixture, sdk_flavours.py); the CLI's, with the sync SDK.

What needs the storage half of issue 14 (a read_committed fetch that stops at the last stable
offset and answers the aborted transactions) checks by behaviour and skips, saying so, while the
cluster does not do it yet."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any, TypeVar

import pytest
from sdk_flavours import SYNC, Sdk
from txn_cluster import gateway_stub, wait_for

from riverlog.client import (
    AbortableTransactionError,
    AdminClient,
    FatalTransactionError,
    TopicPartition,
    TransactionStateError,
)
from riverlog.cluster import LocalCluster, unique_topic_name
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.control import ControlRecordType, parse_end_txn_marker
from riverlog.common.records.header import parse_header, peek_size
from riverlog.common.rpc.channel import CLIENT_ID_KEY
from riverlog.v1 import common_pb2, data_pb2, gateway_pb2_grpc

pytestmark = pytest.mark.timeout(300)
T = TypeVar("T")
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(shared_txn_cluster: LocalCluster) -> LocalCluster:
    """The transaction cluster this module shares (conftest.py): names are the module's own."""
    return shared_txn_cluster


@pytest.fixture
def topic(cluster: LocalCluster) -> str:
    name = unique_topic_name("txn-sdk")
    cluster.create_topic(name, partitions=PARTITIONS, replication_factor=3, configs={
        "min.insync.replicas": "2"
    })  # fmt: skip
    return name


@pytest.fixture(scope="module")
def gateway(cluster: LocalCluster) -> Iterator[gateway_pb2_grpc.GatewayStub]:
    with gateway_stub(cluster) as stub:
        yield stub


def producer(sdk: Sdk, cluster: LocalCluster, tid: str, **conf: Any) -> Any:
    return sdk.Producer(bootstrap_servers=cluster.gateway_address, transactional_id=tid, **conf)


def read_all(sdk: Sdk, cluster: LocalCluster, topic: str, isolation: str) -> list[Any]:
    """Every record a consumer with `isolation` reads from the start up to the end offsets
    (the LSO under read_committed)."""
    with sdk.Consumer(
        bootstrap_servers=cluster.gateway_address,
        auto_offset_reset="earliest",
        isolation_level=isolation,
    ) as consumer:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        out: list[Any] = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "the consumer did not reach the end offsets"
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(records)
        return out


def log_batches(stub: gateway_pb2_grpc.GatewayStub, topic: str, partition: int) -> list[Any]:
    """(header, bytes) of every stored batch of the partition, markers included."""
    request = data_pb2.FetchRequest(
        max_wait_ms=0,
        max_bytes=1 << 20,
        isolation_level=common_pb2.READ_UNCOMMITTED,
        partitions=[data_pb2.FetchPartition(
            topic=topic, partition=partition, fetch_offset=0, partition_max_bytes=1 << 20
        )],
    )  # fmt: skip
    answer = stub.Fetch(request, timeout=30, metadata=((CLIENT_ID_KEY, "txn-sdk-test"),))
    part = answer.partitions[0]
    assert part.error_code == ErrorCode.NONE, part
    data, out, pos = bytes(part.records), [], 0
    while (size := peek_size(data, pos)) > 0 and pos + size <= len(data):
        out.append((parse_header(data, pos), data[pos : pos + size]))
        pos += size
    return out


def markers(stub: gateway_pb2_grpc.GatewayStub, topic: str, partition: int) -> list[Any]:
    return [
        parse_end_txn_marker(raw).control_type
        for header, raw in log_batches(stub, topic, partition)
        if header.is_control
    ]


def test_calls_out_of_order_are_refused_and_change_nothing(sdk: Sdk, cluster: LocalCluster) -> None:
    with producer(sdk, cluster, unique_topic_name("order")) as p:
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            p.begin_transaction()  # before init_transactions
        p.init_transactions(timeout=60)
        with pytest.raises(TransactionStateError, match="send outside a transaction"):
            p.send("anything", b"v")
        with pytest.raises(TransactionStateError, match="commit"):
            p.commit_transaction()
        p.begin_transaction()
        with pytest.raises(TransactionStateError, match="begin_transaction"):
            p.begin_transaction()
        p.commit_transaction(timeout=30)  # nothing sent: no EndTxn, ready again
        p.begin_transaction()
        p.abort_transaction(timeout=30)
    with sdk.Producer(bootstrap_servers=cluster.gateway_address) as plain:
        with pytest.raises(TransactionStateError, match=r"needs transactional\.id"):
            plain.init_transactions()


def test_commit_shows_every_partition_of_the_transaction(
    sdk: Sdk, cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub, topic: str
) -> None:
    with producer(sdk, cluster, "commit-" + topic) as p:
        p.init_transactions(timeout=60)
        first = p.producer_id_and_epoch
        assert first is not None and first.is_valid
        p.begin_transaction()
        futures = [p.send(topic, b"c%d" % i, partition=i % PARTITIONS) for i in range(30)]
        p.commit_transaction(timeout=60)
        assert all(f.result(timeout=0).offset >= 0 for f in futures)
        after = p.producer_id_and_epoch
        assert after is not None and after.epoch == first.epoch + 1  # KIP-890: bumped
        # The next transaction writes under the new epoch, sequences from 0 again.
        p.begin_transaction()
        p.send(topic, b"second", partition=0).result(timeout=60)
        p.commit_transaction(timeout=60)
    for partition in range(PARTITIONS):
        expected = [ControlRecordType.COMMIT] * (2 if partition == 0 else 1)
        wait_for(lambda p=partition, e=expected: markers(gateway, topic, p) == e, what="markers")
        data = [h for h, _ in log_batches(gateway, topic, partition) if not h.is_control]
        assert data and all(h.is_transactional for h in data)
    committed = sorted(r.value for r in read_all(sdk, cluster, topic, "read_committed"))
    assert committed == sorted([b"c%d" % i for i in range(30)] + [b"second"])
    assert len(read_all(sdk, cluster, topic, "read_uncommitted")) == 31  # markers never shown


def test_abort_hides_the_transaction_from_read_committed(
    sdk: Sdk, cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub, topic: str
) -> None:
    with producer(sdk, cluster, "abort-" + topic, linger_ms=10_000) as p:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        written = [p.send(topic, b"aborted-%d" % i, partition=i % 2) for i in range(10)]
        p.flush(timeout=60)  # on the leaders before the abort
        assert all(f.result(timeout=0).offset >= 0 for f in written)
        # Queued at the abort (it then fails), or already sent when the sender was idle (an
        # idle sender does not wait for linger.ms): then it is written, and aborted below.
        late = p.send(topic, b"never", partition=2)
        p.abort_transaction(timeout=60)
        try:
            late.result(timeout=30)
        except AbortableTransactionError as e:
            assert "aborted" in str(e)
        p.begin_transaction()
        p.send(topic, b"kept", partition=0)
        p.commit_transaction(timeout=60)  # flushes: linger.ms does not hold a commit
    for partition in (0, 1):
        wait_for(
            lambda p=partition: (
                markers(gateway, topic, p)
                == [ControlRecordType.ABORT, ControlRecordType.COMMIT][: 2 - p]
            ),
            what="abort and commit markers",
        )
    uncommitted = {r.value for r in read_all(sdk, cluster, topic, "read_uncommitted")}
    assert {b"aborted-%d" % i for i in range(10)} | {b"kept"} <= uncommitted
    committed = [r.value for r in read_all(sdk, cluster, topic, "read_committed")]
    assert committed == [b"kept"]


def test_a_second_producer_fences_the_first(
    sdk: Sdk, cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub, topic: str
) -> None:
    tid = "fence-" + topic
    with producer(sdk, cluster, tid) as zombie, producer(sdk, cluster, tid) as successor:
        zombie.init_transactions(timeout=60)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie-1", partition=0).result(timeout=60)
        successor.init_transactions(timeout=60)  # fences, aborts the zombie's transaction
        # The zombie's late write to a partition of its transaction: refused by the leader
        # (the abort marker carries a newer epoch); it fails fatally as PRODUCER_FENCED.
        late = zombie.send(topic, b"zombie-2", partition=0)
        with pytest.raises(RiverlogError) as refused:
            late.result(timeout=60)
        assert refused.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
        with pytest.raises(FatalTransactionError) as fenced:
            zombie.commit_transaction(timeout=60)
        assert fenced.value.code == ErrorCode.PRODUCER_FENCED
        with pytest.raises(FatalTransactionError):
            zombie.begin_transaction()  # fatal: nothing more but close
        successor.begin_transaction()
        successor.send(topic, b"successor", partition=0)
        successor.commit_transaction(timeout=60)
    values = [r.value for r in read_all(sdk, cluster, topic, "read_uncommitted")]
    assert b"zombie-2" not in values and b"successor" in values
    # The abort's marker is written before the successor's InitProducerId is answered (it is
    # told CONCURRENT_TRANSACTIONS until the abort completes); the commit's is written after
    # EndTxn is answered (decision 0028, as Kafka): wait for it.
    wait_for(
        lambda: markers(gateway, topic, 0) == [ControlRecordType.ABORT, ControlRecordType.COMMIT],
        what="the abort marker, then the commit marker",
    )


def test_a_fenced_producer_cannot_add_a_partition(
    sdk: Sdk, cluster: LocalCluster, topic: str
) -> None:
    """A zombie writing to a partition not yet in its transaction is refused by the
    coordinator (AddPartitionsToTxn: PRODUCER_FENCED) before anything is written."""
    tid = "fence-add-" + topic
    with producer(sdk, cluster, tid) as zombie, producer(sdk, cluster, tid) as successor:
        zombie.init_transactions(timeout=60)
        successor.init_transactions(timeout=60)
        zombie.begin_transaction()
        record = zombie.send(topic, b"zombie", partition=1)
        with pytest.raises(FatalTransactionError) as refused:
            record.result(timeout=60)
        assert refused.value.code == ErrorCode.PRODUCER_FENCED
        with pytest.raises(FatalTransactionError):
            zombie.commit_transaction(timeout=30)
    assert not read_all(sdk, cluster, topic, "read_uncommitted")


def test_a_transaction_open_too_long_is_aborted_and_cannot_commit(
    sdk: Sdk, cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub, topic: str
) -> None:
    tid = "timeout-" + topic
    with producer(sdk, cluster, tid, transaction_timeout_ms=1000) as p:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        p.send(topic, b"forgotten", partition=2).result(timeout=60)
        wait_for(lambda: markers(gateway, topic, 2) == [ControlRecordType.ABORT], what="abort")
        # The coordinator fenced the epoch when it aborted (decision 0028): the producer
        # cannot commit (PRODUCER_FENCED today; KIP-890 part 2 would make it abortable).
        with pytest.raises((FatalTransactionError, AbortableTransactionError)):
            p.commit_transaction(timeout=60)
    assert markers(gateway, topic, 2) == [ControlRecordType.ABORT]  # no commit after it


def test_a_failed_send_makes_the_transaction_abortable(
    sdk: Sdk, cluster: LocalCluster, topic: str
) -> None:
    small = unique_topic_name("txn-small")
    cluster.create_topic(small, partitions=1, replication_factor=3, configs={
        "max.message.bytes": "200"
    })  # fmt: skip
    with producer(sdk, cluster, "abortable-" + topic) as p:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        ok = p.send(topic, b"ok", partition=0)
        bad = p.send(small, b"x" * 1000, partition=0)
        p.flush(timeout=60)
        assert bad.exception(timeout=0) is not None  # MESSAGE_TOO_LARGE at the leader
        with pytest.raises(AbortableTransactionError):
            p.commit_transaction(timeout=60)
        with pytest.raises(AbortableTransactionError):
            p.send(topic, b"more", partition=0)  # only abort is allowed now
        p.abort_transaction(timeout=60)
        p.begin_transaction()
        p.send(topic, b"after", partition=0)
        p.commit_transaction(timeout=60)
        assert ok.result(timeout=0).offset >= 0  # written, then aborted
    values = [r.value for r in read_all(sdk, cluster, topic, "read_uncommitted")]
    assert values == [b"ok", b"after"]


def test_offsets_commit_with_the_transaction(sdk: Sdk, cluster: LocalCluster, topic: str) -> None:
    group = "copier-" + topic
    with producer(sdk, cluster, "offsets-" + topic) as p:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        p.send_offsets_to_transaction({TopicPartition(topic, 0): 5}, group, timeout=60)
        p.commit_transaction(timeout=60)
    with sdk.Consumer(bootstrap_servers=cluster.gateway_address, group_id=group) as consumer:
        committed = wait_for(
            lambda: consumer.committed({TopicPartition(topic, 0)}).get(TopicPartition(topic, 0)),
            what="the committed offset",
        )
        assert committed.offset == 5


def cli(cluster: LocalCluster, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "riverlog.cli.main", *argv, "--bootstrap", cluster.gateway_address],
        capture_output=True, text=True, timeout=120, check=check,
    )  # fmt: skip


def test_cli_abort_fences_the_id_and_aborts_its_open_transaction(
    cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub, topic: str
) -> None:
    tid = "cli-abort-" + topic
    with producer(SYNC, cluster, tid) as p:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        p.send(topic, b"hanging", partition=1).result(timeout=60)
        run = cli(cluster, "transactions", "abort", "--transactional-id", tid, "--json")
        document = json.loads(run.stdout)
        assert document["previous_state"] == "Ongoing" and document["outcome"] == "aborted"
        assert document["partitions"] == [f"{topic}-1"] and document["fenced"]
        epoch = document["producer_epoch"]
        with pytest.raises(FatalTransactionError) as fenced:
            p.commit_transaction(timeout=60)
        assert fenced.value.code == ErrorCode.PRODUCER_FENCED
    wait_for(lambda: markers(gateway, topic, 1) == [ControlRecordType.ABORT], what="the abort")
    idle = cli(cluster, "transactions", "abort", "--transactional-id", tid)
    assert "no open transaction" in idle.stdout  # nothing open: nothing done
    forced = json.loads(
        cli(cluster, "transactions", "abort", "--transactional-id", tid, "--fence", "--json").stdout
    )
    assert forced["fenced"] and forced["producer_epoch"] > epoch  # fenced even when idle
    unknown = cli(cluster, "transactions", "abort", "--transactional-id", "never-" + topic,
                  check=False)  # fmt: skip
    assert unknown.returncode != 0 and "TRANSACTIONAL_ID_NOT_FOUND" in unknown.stderr


def test_cli_read_committed_consume_and_group_lag_stop_at_the_lso(
    cluster: LocalCluster, topic: str
) -> None:
    group = "lag-" + topic
    tp = TopicPartition(topic, 0)
    with producer(SYNC, cluster, "cli-lso-" + topic) as p:
        p.init_transactions(timeout=60)
        p.begin_transaction()
        p.send(topic, b"committed", partition=0)
        p.commit_transaction(timeout=60)
        p.begin_transaction()
        p.send(topic, b"open", partition=0).result(timeout=60)  # offset 2, left open
        with SYNC.Consumer(bootstrap_servers=cluster.gateway_address, group_id=group) as consumer:
            consumer.commit_sync({tp: 1})
        uncommitted = cli(cluster, "consume", topic, "--partition", "0", "--from-beginning",
                          "--isolation-level", "read_uncommitted")  # fmt: skip
        assert uncommitted.stdout.split() == ["committed", "open"]
        committed = cli(cluster, "consume", topic, "--partition", "0", "--from-beginning",
                        "--isolation-level", "read_committed")  # fmt: skip
        lags = {
            level: json.loads(
                cli(
                    cluster, "groups", "describe", group, "--json", "--isolation-level", level
                ).stdout
            )["partitions"][0]
            for level in ("read_uncommitted", "read_committed")
        }
        assert lags["read_uncommitted"]["log_end_offset"] == 3  # the commit marker is at 1
        assert lags["read_uncommitted"]["lag"] == 2
        p.abort_transaction(timeout=60)
    assert committed.stdout.split() == ["committed"]
    assert (lags["read_committed"]["log_end_offset"], lags["read_committed"]["lag"]) == (2, 1)


def copy_transactions(
    sdk: Sdk, cluster: LocalCluster, source: str, sink: str, group: str, tid: str, limit: int | None
) -> tuple[Any, Any, int]:
    """Kafka's consume-transform-produce loop (the README's): read `source` read_committed
    in the group, write each value upper-cased to the same partition of `sink` and commit the
    positions with the output. Stops after `limit` transactions, or when the group's
    partitions are all copied; returns the still-open clients (the caller closes or
    abandons them) and the number of transactions committed."""
    consumer = sdk.Consumer(
        bootstrap_servers=cluster.gateway_address,
        group_id=group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=7,
    )
    p = producer(sdk, cluster, tid)
    consumer.subscribe([source])
    p.init_transactions(timeout=60)
    ends = {TopicPartition(source, i): 0 for i in range(PARTITIONS)}
    ends = consumer.end_offsets(list(ends))
    committed = 0
    deadline = time.monotonic() + 120
    while limit is None or committed < limit:
        assert time.monotonic() < deadline, "the copier did not finish"
        batches = consumer.poll(timeout_ms=500)
        if not batches:
            assigned = consumer.assignment()
            if len(assigned) == PARTITIONS and all(
                consumer.position(tp) >= ends[tp] for tp in assigned
            ):
                break
            continue
        p.begin_transaction()
        for tp, records in batches.items():
            for record in records:
                p.send(sink, record.value.upper(), partition=tp.partition)
        positions = {tp: records[-1].offset + 1 for tp, records in batches.items()}
        try:
            p.send_offsets_to_transaction(positions, consumer.group_metadata(), timeout=60)
        except AbortableTransactionError:
            p.abort_transaction(timeout=60)
            consumer.close()
            p.close()
            raise
        p.commit_transaction(timeout=60)
        committed += 1
    return p, consumer, committed


def test_consume_transform_produce_copies_exactly_once_across_a_crash(
    sdk: Sdk, cluster: LocalCluster, topic: str
) -> None:
    sink = unique_topic_name("txn-sink")
    cluster.create_topic(sink, partitions=PARTITIONS, replication_factor=3)
    with sdk.Producer(bootstrap_servers=cluster.gateway_address) as plain:
        for i in range(90):
            plain.send(topic, b"v%02d" % i, partition=i % PARTITIONS)
    group, tid = "copier-" + topic, "copier-" + topic
    crashed, crashed_consumer, done = copy_transactions(sdk, cluster, topic, sink, group, tid, 2)
    assert done == 2
    # A third transaction is written and never committed: the copier "crashes" holding it.
    crashed.begin_transaction()
    crashed.send(sink, b"NEVER", partition=0).result(timeout=60)
    crashed_consumer.close()  # leaves the group without committing (auto commit is off)
    # Its successor takes the same transactional.id: the open transaction is aborted.
    successor, consumer, _ = copy_transactions(sdk, cluster, topic, sink, group, tid, None)
    with pytest.raises(FatalTransactionError):
        crashed.commit_transaction(timeout=60)
    crashed.close()
    consumer.close()
    successor.close()
    expected = {p: [b"V%02d" % i for i in range(p, 90, PARTITIONS)] for p in range(PARTITIONS)}
    # Every record was copied once: the offsets committed with the output (the only aborted
    # record is the crashed copier's).
    written = read_all(sdk, cluster, sink, "read_uncommitted")
    for partition in range(PARTITIONS):
        values = [r.value for r in written if r.partition == partition and r.value != b"NEVER"]
        assert values == expected[partition]
    copied = read_all(sdk, cluster, sink, "read_committed")
    for partition in range(PARTITIONS):
        assert [r.value for r in copied if r.partition == partition] == expected[partition]


def test_the_readme_loop_aborts_rewinds_and_goes_on_after_an_abortable_error(
    sdk: Sdk, cluster: LocalCluster, gateway: gateway_pb2_grpc.GatewayStub, topic: str
) -> None:
    """The README's consume-transform-produce loop, its abortable branch included: one record's
    output is larger than the sink's max.message.bytes, so every transaction holding it fails
    at the partition leader (MESSAGE_TOO_LARGE: abortable) until an operator raises the limit.
    Each time the loop aborts, rewinds to the group's committed offsets and goes on; in the end
    every record is copied exactly once, in order per partition, and the offsets committed with
    the output are the source's ends. (A transaction the coordinator timed out is not used:
    its producer is fenced, the loop's fatal branch; decision 0030.)"""
    sink = unique_topic_name("txn-loop-sink")
    cluster.create_topic(sink, partitions=PARTITIONS, replication_factor=3, configs={
        "max.message.bytes": "1000"
    })  # fmt: skip
    values = [b"v%02d" % i if i != 40 else b"big" + b"x" * 2000 for i in range(60)]
    with sdk.Producer(bootstrap_servers=cluster.gateway_address) as plain:
        for i, value in enumerate(values):
            plain.send(topic, value, partition=i % PARTITIONS)
    group, tid = "loop-" + topic, "loop-" + topic
    consumer = sdk.Consumer(
        bootstrap_servers=cluster.gateway_address,
        group_id=group,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_records=7,
    )
    p = producer(sdk, cluster, tid)
    aborted: list[ErrorCode] = []
    stop = threading.Event()

    def operator() -> None:  # raises the limit once the loop has failed on it twice
        wait_for(lambda: len(aborted) >= 2 or stop.is_set(), timeout_s=120, what="two aborts")
        if stop.is_set():
            return
        with AdminClient(bootstrap_servers=cluster.gateway_address) as admin:
            admin.alter_configs({sink: {"max.message.bytes": str(1 << 20)}})

    fixer = threading.Thread(target=operator, daemon=True)
    fixer.start()
    tps = [TopicPartition(topic, i) for i in range(PARTITIONS)]
    try:
        consumer.subscribe([topic])
        p.init_transactions(timeout=60)
        ends = consumer.end_offsets(tps)
        deadline = time.monotonic() + 180
        while True:
            assert time.monotonic() < deadline, f"the loop did not finish ({aborted})"
            batches = consumer.poll(timeout_ms=500)
            if not batches:
                assigned = consumer.assignment()
                if len(assigned) == PARTITIONS and all(
                    consumer.position(tp) >= ends[tp] for tp in assigned
                ):
                    break
                continue
            # The README's loop from here (sent to the source's partition, to check order).
            p.begin_transaction()
            try:
                for tp, records in batches.items():
                    for record in records:
                        p.send(sink, record.value.upper(), key=record.key, partition=tp.partition)
                positions = {tp: records[-1].offset + 1 for tp, records in batches.items()}
                p.send_offsets_to_transaction(positions, consumer.group_metadata(), timeout=60)
                p.commit_transaction(timeout=60)
            except AbortableTransactionError as e:
                aborted.append(ErrorCode(e.code))
                p.abort_transaction(timeout=60)
                for tp in batches:
                    committed = consumer.committed({tp})[tp]
                    consumer.seek(tp, committed.offset if committed else 0)
    finally:
        stop.set()
        fixer.join(timeout=150)
        consumer.close()
        p.close()
    assert len(aborted) >= 2 and set(aborted) == {ErrorCode.MESSAGE_TOO_LARGE}, aborted
    expected = {q: [v.upper() for v in values[q::PARTITIONS]] for q in range(PARTITIONS)}
    copied = read_all(sdk, cluster, sink, "read_committed")
    for q in range(PARTITIONS):
        assert [r.value for r in copied if r.partition == q] == expected[q]
    # The aborted attempts ended at the big record's partition with ABORT markers.
    assert markers(gateway, sink, 1).count(ControlRecordType.ABORT) == len(aborted)
    with sdk.Consumer(bootstrap_servers=cluster.gateway_address, group_id=group) as reader:
        offsets = reader.committed(set(tps))
    assert {tp: o.offset if o else None for tp, o in offsets.items()} == ends
