"""The SDK against the session's real cluster (etcd, metadata, three storage nodes, one gateway):
produce and consume round trips with every compression type, keys, headers and null values,
each acks setting, positions and seeks, offsets look-ups, auto.offset.reset, flush and close,
an unknown topic (to produce to, and assigned: read once created), and the admin client. Each
test runs against both SDK flavours, the sync clients and the asyncio ones (the `sdk` fixture,
sdk_flavours.py). A round trip (zstd), acks=all on replication factor 3 and a group's committed
offsets run over internal TLS too, on the shared `tls_cluster` (the `client_cluster` fixture,
conftest.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from sdk_flavours import Sdk
from shared_clusters import ClientCluster

from riverlog.client import (
    ClientTimeoutError,
    ConsumerRecord,
    NewTopic,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    RiverlogError,
    TopicPartition,
)
from riverlog.common.errors import ErrorCode
from riverlog.common.partitioner import partition_for_key

pytestmark = pytest.mark.integration

NewTopicFn = Callable[..., str]
# Bounded below pytest's timeout, so a record that cannot be delivered fails with its last error.
BOUNDED = {"delivery.timeout.ms": 60_000, "request.timeout.ms": 20_000}


Target = str | Mapping[str, str]  # a gateway's address, or a `client_cluster.config`


def base(target: Target) -> dict[str, object]:
    return {"bootstrap.servers": target} if isinstance(target, str) else dict(target)


def producer(sdk: Sdk, target: Target, **config: object) -> Any:
    return sdk.Producer({**base(target), **BOUNDED}, **config)


def consume(
    sdk: Sdk, target: Target, tps: list[TopicPartition], want: int, **config: object
) -> list[ConsumerRecord]:
    """Read from the start until `want` records came back (bounded: 200 polls)."""
    out: list[ConsumerRecord] = []
    settings = {"auto.offset.reset": "earliest", "fetch.max.wait.ms": 100, **config}
    with sdk.Consumer({**base(target), **settings}) as consumer:
        consumer.assign(tps)
        for _ in range(200):
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(records)
            if len(out) >= want:
                break
    return out


def over(values: list[str], tls: str) -> Any:
    """`values` on the session cluster (ids unchanged), and `tls` on the TLS cluster too: the
    arguments of a parametrize over (value, client_cluster), client_cluster indirect."""
    cases = [pytest.param(v, "cluster", id=v) for v in values]
    return [*cases, pytest.param(tls, "tls_cluster", id=f"{tls}-tls")]


@pytest.mark.parametrize(
    ("compression", "client_cluster"),
    over(["none", "gzip", "snappy", "lz4", "zstd"], "zstd"),
    indirect=["client_cluster"],
)
def test_round_trip_per_compression(
    sdk: Sdk, client_cluster: ClientCluster, compression: str
) -> None:
    topic = client_cluster.new_topic(partitions=3)
    target = client_cluster.config
    sent = []
    with producer(sdk, target, compression_type=compression, acks=1) as p:
        for i in range(600):
            key = None if i % 5 == 0 else b"key-%d" % (i % 17)
            value = None if i % 7 == 0 else b"value-%d-" % i + b"x" * (i % 50)
            headers = [("i", str(i).encode()), ("null", None)] if i % 3 == 0 else None
            sent.append((key, value, headers or [], p.send(topic, value, key=key, headers=headers)))
        p.flush()
    metas = [f.result(30) for *_, f in sent]
    tps = [TopicPartition(topic, i) for i in range(3)]
    got = {(r.partition, r.offset): r for r in consume(sdk, target, tps, len(sent))}
    assert len(got) == len(sent)
    for (key, value, headers, _), meta in zip(sent, metas, strict=True):
        record = got[(meta.partition, meta.offset)]
        assert (record.key, record.value, record.headers) == (key, value, headers)
        assert record.timestamp == meta.timestamp
        if key is not None:
            assert meta.partition == partition_for_key(key, 3)


@pytest.mark.parametrize(
    ("acks", "client_cluster"), over(["0", "1", "all"], "all"), indirect=["client_cluster"]
)
def test_each_acks_setting(sdk: Sdk, client_cluster: ClientCluster, acks: str) -> None:
    topic = client_cluster.new_topic(partitions=1, replication_factor=3)
    target = client_cluster.config
    # Without idempotence, order under retries needs one request in flight, as in Kafka: with
    # acks=1 and five in flight, a request refused while the new topic's leader gets ready is
    # retried by the client and may land after a later one (seen once, in the asyncio SDK).
    in_flight = {"max_in_flight_requests_per_connection": 1} if acks == "1" else {}
    with producer(sdk, target, acks=acks, **in_flight) as p:
        futures = [p.send(topic, b"v%d" % i) for i in range(50)]
        p.flush()
        offsets = [f.result(30).offset for f in futures]
    if acks == "0":
        assert offsets == [-1] * 50
    else:
        assert offsets == list(range(50))
    records = consume(sdk, target, [TopicPartition(topic, 0)], 50)
    assert [r.value for r in records] == [b"v%d" % i for i in range(50)]


def test_positions_seeks_and_offsets(sdk: Sdk, gateway_address: str, new_topic: NewTopicFn) -> None:
    topic = new_topic(partitions=2)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with producer(sdk, gateway_address, acks="all") as p:
        for i in range(20):
            p.send(topic, b"v%d" % i, partition=0, timestamp_ms=1_000_000 + 1000 * i)
    with sdk.Consumer(bootstrap_servers=gateway_address, fetch_max_wait_ms=100) as c:
        assert c.beginning_offsets([tp0, tp1]) == {tp0: 0, tp1: 0}
        assert c.end_offsets([tp0, tp1]) == {tp0: 20, tp1: 0}
        found = c.offsets_for_times({tp0: 1_005_500, tp1: 1_000_000})
        assert found == {tp0: OffsetAndTimestamp(6, 1_006_000), tp1: None}
        assert c.offsets_for_times({tp0: 9_999_999_999_999}) == {tp0: None}
        c.assign([tp0, tp1])
        assert c.position(tp0) == 20  # latest
        c.seek(tp0, 15)
        records = []
        for _ in range(50):
            records += c.poll(timeout_ms=500).get(tp0, [])
            if len(records) >= 5:
                break
        assert [r.offset for r in records] == [15, 16, 17, 18, 19]
        assert c.position(tp0) == 20
        c.seek_to_beginning(tp0)
        assert c.position(tp0) == 0
        first = c.poll(timeout_ms=5000, max_records=1)
        assert [r.offset for r in first[tp0]] == [0]


def test_auto_offset_reset(sdk: Sdk, gateway_address: str, new_topic: NewTopicFn) -> None:
    topic = new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    with producer(sdk, gateway_address) as p:
        for i in range(10):
            p.send(topic, b"v%d" % i)
    assert len(consume(sdk, gateway_address, [tp], 10, **{"auto.offset.reset": "earliest"})) == 10
    with sdk.Consumer(bootstrap_servers=gateway_address, auto_offset_reset="latest") as c:
        c.assign([tp])
        assert c.position(tp) == 10
    with sdk.Consumer(bootstrap_servers=gateway_address, auto_offset_reset="none") as c:
        c.assign([tp])
        with pytest.raises(OffsetOutOfRangeError):
            c.poll(timeout_ms=100)
    # A position past the end of the log: reset by the policy, or an error with none.
    with sdk.Consumer(bootstrap_servers=gateway_address, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 1000)
        records = []
        for _ in range(50):
            records += c.poll(timeout_ms=500).get(tp, [])
            if len(records) >= 10:
                break
        assert [r.offset for r in records] == list(range(10))
    with sdk.Consumer(bootstrap_servers=gateway_address, auto_offset_reset="none") as c:
        c.assign([tp])
        c.seek(tp, 1000)
        with pytest.raises(OffsetOutOfRangeError, match="at offset 1000"):
            for _ in range(50):
                c.poll(timeout_ms=200)


def test_flush_and_close(sdk: Sdk, gateway_address: str, new_topic: NewTopicFn) -> None:
    topic = new_topic(partitions=1)
    p = producer(sdk, gateway_address, linger_ms=30_000)
    first = [p.send(topic, b"a%d" % i) for i in range(5)]
    p.flush(timeout=30)
    assert all(f.done() for f in first)
    second = [p.send(topic, b"b%d" % i) for i in range(5)]
    p.close(timeout=30)  # delivers what is pending despite linger.ms
    assert [f.result(0).offset for f in first + second] == list(range(10))


def test_unknown_topic_fails_after_max_block_ms(
    sdk: Sdk, gateway_address: str, topic_name: str
) -> None:
    with producer(sdk, gateway_address, max_block_ms=500) as p:
        start = time.monotonic()
        with pytest.raises(
            ClientTimeoutError, match=f"topic '{topic_name}' not present in metadata"
        ):
            p.send(topic_name, b"v")
        assert time.monotonic() - start < 60  # bounded by max.block.ms, not the 60 s default


def test_assigned_missing_topic_waits_while_the_others_are_read(
    sdk: Sdk, gateway_address: str, new_topic: NewTopicFn, topic_name: str
) -> None:
    """As Kafka's consumer: a partition of a topic not created yet (or beyond a topic's
    partition count) keeps its offset reset pending, retried on a back-off, without holding
    back the partitions that exist; it is read once its topic is created."""
    topic = new_topic(partitions=1)
    real, missing = TopicPartition(topic, 0), TopicPartition(topic_name, 0)
    beyond = TopicPartition(topic, 1)
    config = {"auto.offset.reset": "earliest", "fetch.max.wait.ms": 100}
    with sdk.Consumer({"bootstrap.servers": gateway_address, **config}) as consumer:
        consumer.assign([missing, real, beyond])
        with producer(sdk, gateway_address) as p:
            for i in range(3):
                p.send(topic, b"r%d" % i)

        def read(want: int) -> list[tuple[str, bytes | None]]:
            got: list[tuple[str, bytes | None]] = []
            deadline = time.monotonic() + 60
            while len(got) < want and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    got += [(r.topic, r.value) for r in records]
            return got

        assert read(3) == [(topic, b"r0"), (topic, b"r1"), (topic, b"r2")]
        new_topic(name=topic_name)
        with producer(sdk, gateway_address) as p:
            for i in range(2):
                p.send(topic_name, b"m%d" % i)
            p.send(topic, b"r3")
        assert sorted(read(3)) == sorted([(topic, b"r3"), (topic_name, b"m0"), (topic_name, b"m1")])
        assert consumer.position(missing) == 2


def test_admin_client(sdk: Sdk, gateway_address: str, topic_name: str) -> None:
    with sdk.AdminClient(bootstrap_servers=gateway_address, client_id="admin-test") as admin:
        assert admin.create_topics([NewTopic(topic_name, 2, 1, {"retention.ms": "3600000"})]) == {
            topic_name: None
        }
        with pytest.raises(RiverlogError) as info:
            admin.create_topics([NewTopic(topic_name, 1, 1)])
        assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert topic_name in admin.list_topics()
        described = admin.describe_topics([topic_name])[topic_name]
        assert [p.partition for p in described.partitions] == [0, 1]
        assert described.configs["retention.ms"] == "3600000"
        admin.alter_configs({topic_name: {"cleanup.policy": "compact", "retention.ms": None}})
        configs = admin.describe_configs([topic_name])[topic_name]
        assert configs["cleanup.policy"].value == "compact"
        assert configs["retention.ms"].is_default
        assert admin.create_partitions({topic_name: 3}) == {topic_name: None}
        cluster = admin.describe_cluster()
        assert sum(1 for n in cluster.nodes if n.kind == "storage") == 3
        assert admin.delete_topics([topic_name]) == {topic_name: None}
        outcomes = admin.delete_topics([topic_name], raise_on_error=False)
        assert outcomes[topic_name] is not None


def test_delete_records_moves_the_log_start(
    sdk: Sdk, gateway_address: str, new_topic: NewTopicFn
) -> None:
    topic = new_topic(partitions=1)
    tp = TopicPartition(topic, 0)
    with producer(sdk, gateway_address) as p:
        for i in range(10):
            p.send(topic, b"v%d" % i)
    with sdk.AdminClient(bootstrap_servers=gateway_address) as admin:
        assert admin.delete_records({tp: 4}) == {tp: 4}
        assert admin.list_offsets({tp: -2})[tp] == OffsetAndTimestamp(4, -1)
    records = consume(sdk, gateway_address, [tp], 6)
    assert [r.offset for r in records] == list(range(4, 10))


def test_assign_with_a_group_starts_at_its_committed_offset(
    sdk: Sdk, client_cluster: ClientCluster
) -> None:
    """As Kafka's consumer: assign() plus group.id starts where the group committed (no
    rebalance, the group only stores offsets); without a commit, per auto.offset.reset."""
    topic = client_cluster.new_topic(partitions=2)
    target = client_cluster.config
    with producer(sdk, target) as p:
        for i in range(10):
            p.send(topic, b"v%d" % i, partition=0)
            p.send(topic, b"w%d" % i, partition=1)
    group = f"assign-{topic}"
    with sdk.AdminClient(target) as admin:
        admin.alter_group_offsets(group, {TopicPartition(topic, 0): 7})
    tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    config = {**target, "group.id": group}
    with sdk.Consumer({**config, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign(tps)
        assert consumer.position(tps[0]) == 7
        assert consumer.position(tps[1]) == 0  # nothing committed: auto.offset.reset
    records = consume(sdk, target, tps, 13, **{"group.id": group})
    assert [r.value for r in records if r.partition == 0] == [b"v7", b"v8", b"v9"]
    assert len(records) == 13
