"""The consumer's direct fetch path (decision 0047) through real processes: on the session
cluster (whose launcher gives every gateway and storage node the direct-access key) the default
consumer fetches at the leaders' direct ports, and reads every record once and in order, the
same as with direct.access=false (which sends nothing there), read_committed too (aborted
transactions dropped, nothing past the last stable offset); the TLS cluster offers no direct
access and is read through the gateway. A cluster of its own whose gateway grants 64 KiB at a
time shows the renewal (grant after grant, nothing lost or read twice) and a leader change in
the middle of the stream (the consumer follows the leader to its new node's direct port)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from direct_client import direct_counters, leader_of
from shared_clusters import ClientCluster

from riverlog.client import AdminClient, Consumer, ConsumerRecord, Producer, TopicPartition
from riverlog.cluster import LocalCluster, unique_topic_name

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NewTopic = Callable[..., str]
VALUE = b"v" * 1000


def _produce(target: Mapping[str, object], topic: str, partitions: int, count: int) -> None:
    config = {**target, "linger.ms": 5, "delivery.timeout.ms": 60_000}
    with Producer(config) as producer:
        for i in range(count):
            producer.send(topic, b"%08d" % i + VALUE, partition=i % partitions)
        producer.flush(60)


def _read(
    target: Mapping[str, object], tps: list[TopicPartition], want: int, **config: object
) -> tuple[list[ConsumerRecord], dict[str, float]]:
    """Read `tps` from the start until `want` records came (bounded), then poll once more to
    see that nothing else comes; the records and the consumer's metrics."""
    settings = {
        **target,
        "auto.offset.reset": "earliest",
        "fetch.max.wait.ms": 100,
        "max.partition.fetch.bytes": 64 * 1024,  # many chunks, several in flight
        **config,
    }
    out: list[ConsumerRecord] = []
    with Consumer(settings) as consumer:
        consumer.assign(tps)
        for _ in range(400):
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(records)
            if len(out) >= want:
                break
        for records in consumer.poll(timeout_ms=200).values():
            out.extend(records)
        return out, consumer.metrics()


def _check_once_in_order(records: list[ConsumerRecord], partitions: int, count: int) -> None:
    by_partition: dict[int, list[int]] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r.offset)
        assert r.value[8:] == VALUE
    for p in range(partitions):
        assert by_partition.get(p) == list(range(len(range(p, count, partitions))))
    assert sorted(int(r.value[:8]) for r in records) == list(range(count))


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "gateway"])
def test_every_record_once_in_order_direct_or_not(
    gateway_address: str, new_topic: NewTopic, direct: bool
) -> None:
    topic = new_topic(partitions=3)
    target = {"bootstrap.servers": gateway_address}
    _produce(target, topic, 3, 3000)
    tps = [TopicPartition(topic, p) for p in range(3)]
    records, metrics = _read(target, tps, 3000, direct_access=direct)
    _check_once_in_order(records, 3, 3000)
    if direct:
        assert metrics["direct-fetch-total"] > 0 and metrics["direct-grant-total"] >= 1
    else:
        assert metrics["direct-fetch-total"] == 0 and metrics["direct-grant-total"] == 0


def test_read_committed_on_the_direct_path(
    cluster: LocalCluster, gateway_address: str, new_topic: NewTopic
) -> None:
    """Aborted transactions' records are dropped (the answer's aborted list), and an open
    transaction holds the consumer at the last stable offset; the fetches went direct (the
    leader's direct counters moved)."""
    topic = new_topic()
    node = leader_of(cluster, topic).node_id
    before = direct_counters(cluster, node)
    config = {"bootstrap.servers": gateway_address, "transactional.id": unique_topic_name("tx")}
    tp = TopicPartition(topic, 0)
    with Producer(config) as producer:
        producer.init_transactions()
        for outcome in ("commit", "abort", "commit", "open"):
            producer.begin_transaction()
            for i in range(20):
                producer.send(topic, f"{outcome}-{i}".encode(), partition=0)
            if outcome == "commit":
                producer.commit_transaction()
            elif outcome == "abort":
                producer.abort_transaction()
            else:
                producer.flush(30)
        settings = {
            "bootstrap.servers": gateway_address,
            "auto.offset.reset": "earliest",
            "fetch.max.wait.ms": 100,
            "isolation.level": "read_committed",
        }
        with Consumer(settings) as consumer:
            consumer.assign([tp])
            # twice: the first fetch may go through the gateway while the grant is on its
            # way (a consumer never waits for one); the second read goes direct
            for _ in range(2):
                consumer.seek(tp, 0)
                records: list[ConsumerRecord] = []
                for _ in range(100):
                    for batch in consumer.poll(timeout_ms=500).values():
                        records.extend(batch)
                    if len(records) >= 40:
                        break
                values = [r.value.decode() for r in records]
                assert values == [f"commit-{i}" for i in range(20)] * 2
            metrics = consumer.metrics()
        producer.abort_transaction()
    assert metrics["direct-fetch-total"] > 0
    after = direct_counters(cluster, node)
    assert after.bytes_read > before.bytes_read and after.connections > before.connections


@pytest.mark.parametrize("client_cluster", ["tls_cluster"], indirect=True)
def test_a_cluster_without_direct_access_is_read_through_the_gateway(
    client_cluster: ClientCluster,
) -> None:
    topic = client_cluster.new_topic(partitions=2)
    _produce(client_cluster.config, topic, 2, 400)
    tps = [TopicPartition(topic, p) for p in range(2)]
    records, metrics = _read(client_cluster.config, tps, 400)
    _check_once_in_order(records, 2, 400)
    assert metrics["direct-fetch-total"] == 0 and metrics["direct-grant-total"] == 0


@pytest.fixture(scope="module")
def small_grants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Two storage nodes, a gateway that grants 64 KiB at a time."""
    with LocalCluster(
        tmp_path_factory.mktemp("direct-fetch"),
        storage_nodes=2,
        extra_config={"gateway": {"direct.access.grant.bytes": str(64 * 1024)}},
    ) as cluster:
        yield cluster


def test_grants_are_renewed_with_nothing_lost_or_read_twice(small_grants: LocalCluster) -> None:
    topic = unique_topic_name("renewal")
    small_grants.create_topic(topic, 2, 1)
    target = {"bootstrap.servers": small_grants.gateway_address}
    _produce(target, topic, 2, 2000)  # ~2 MB: some thirty grants of 64 KiB
    tps = [TopicPartition(topic, p) for p in range(2)]
    records, metrics = _read(target, tps, 2000)
    _check_once_in_order(records, 2, 2000)
    # grant after grant, each used to its end (a fetch while the next one is on its way goes
    # through the gateway: the count varies with timing)
    assert metrics["direct-grant-total"] >= 5 and metrics["direct-fetch-total"] > 0


def _leader(admin: AdminClient, topic: str) -> int:
    (description,) = admin.describe_topics([topic]).values()
    return int(description.partitions[0].leader)


def test_the_consumer_follows_a_leader_change(small_grants: LocalCluster) -> None:
    topic = unique_topic_name("leader-change")
    small_grants.create_topic(topic, 1, 2)
    target: dict[str, Any] = {"bootstrap.servers": small_grants.gateway_address}
    tp = TopicPartition(topic, 0)
    settings = {**target, "auto.offset.reset": "earliest", "fetch.max.wait.ms": 100}
    out: list[ConsumerRecord] = []
    with AdminClient(target) as admin, Consumer(settings) as consumer:
        consumer.assign([tp])
        _produce(target, topic, 1, 500)
        for _ in range(100):
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(records)
            if len(out) >= 500:
                break
        first = _leader(admin, topic)
        (other,) = {1, 2} - {first}
        admin.alter_partition_reassignments({tp: [other, first]})
        deadline = time.monotonic() + 60
        while _leader(admin, topic) != other and time.monotonic() < deadline:
            admin.elect_leaders("preferred", [tp])
            time.sleep(0.2)
        assert _leader(admin, topic) == other
        before = direct_counters(small_grants, other)
        # in two rounds: the first fetches from the new leader may go through the gateway
        # while its grant is on its way (the consumer never waits for one)
        for round_end in (750, 1000):
            _produce(target, topic, 1, 250)
            for _ in range(200):
                for records in consumer.poll(timeout_ms=500).values():
                    out.extend(records)
                if len(out) >= round_end:
                    break
    assert [r.offset for r in out] == list(range(1000))
    assert [int(r.value[:8]) for r in out] == [*range(500), *range(250), *range(250)]
    assert direct_counters(small_grants, other).bytes_read > before.bytes_read


def test_a_tiny_first_batch_costs_no_refetches(
    cluster: LocalCluster, gateway_address: str, new_topic: NewTopic
) -> None:
    """A topic whose first batch is tiny: the first answer is larger than the next ones, so
    the next are read into its buffer, reused and larger than them (answers of 256 KiB and
    more get kept buffers). Reading past an answer's end took the next answer's first bytes
    and broke the connection's framing (a bogus length: the connection failed and its fetches
    were sent again after a backoff; or a length under the cap: a wait for bytes that never
    came, until request.timeout.ms). The consumer holds its poll after the first answer until
    the node has sent the pipelined ones, so they wait in the socket back to back. Every
    answer is read on one connection, and the fetches are about the answers the records
    need."""
    topic = new_topic()
    tp = TopicPartition(topic, 0)
    node = leader_of(cluster, topic).node_id
    target = {"bootstrap.servers": gateway_address}
    count = 6000  # ~6 MiB: some sixteen answers of 384 KiB, four in flight at a time
    config = {**target, "linger.ms": 5, "batch.size": 32 * 1024, "delivery.timeout.ms": 60_000}
    with Producer(config) as producer:
        producer.send(topic, b"warm", partition=0).result(30)
        for i in range(count):
            producer.send(topic, b"%08d" % i + VALUE, partition=0)
        producer.flush(60)
    before = direct_counters(cluster, node)
    part = 384 * 1024
    size = count * (len(VALUE) + 8 + 30)  # the records' bytes in batches, about
    settings = {**target, "auto.offset.reset": "earliest", "max.partition.fetch.bytes": part}
    records: list[ConsumerRecord] = []
    with Consumer(settings) as consumer:
        consumer.assign([tp])
        for _ in range(100):
            records.extend(consumer.poll(timeout_ms=500).get(tp, []))
            if records:
                break  # the first answer is in, the next three fetches sent
        sent = 4 * (part - 34 * 1024)  # four answers, each short of a batch at most
        for _ in range(200):  # bounded: until the node has sent them
            if direct_counters(cluster, node).bytes_read - before.bytes_read >= sent:
                break
            time.sleep(0.05)
        for _ in range(200):
            records.extend(consumer.poll(timeout_ms=500).get(tp, []))
            if len(records) >= count + 1:
                break
        metrics = consumer.metrics()
    assert [r.offset for r in records] == list(range(count + 1))
    assert records[0].value == b"warm"
    assert [int(r.value[:8]) for r in records[1:]] == list(range(count))
    after = direct_counters(cluster, node)
    assert after.connections - before.connections == 1  # none failed and none was replaced
    assert after.bytes_read - before.bytes_read <= size * 1.3  # nothing fetched twice over
    answers = -(-size // (part - 34 * 1024))
    # + fills of gaps the span guesses leave (small ones, a batch or two), the end's long poll
    assert metrics["direct-fetch-total"] <= answers + answers // 2 + 2
