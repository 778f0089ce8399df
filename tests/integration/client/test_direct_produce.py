"""The SDK producer's direct path (decision 0047) on real clusters: by default it sends its
produce frames to each leader's direct port (its own count and the node's direct counters
move), with `direct.access=false` and on a TLS cluster (no direct access: the gateway answers
DELEGATION_TOKEN_AUTH_DISABLED) it takes the gateway, and every record arrives either way. On a
cluster whose grants cover 128 KiB, the producer renews its grant again and again (each
DELEGATION_TOKEN_EXPIRED answer puts the batches back, not counted as a failed attempt) and
every record is written once, in order, idempotent or not; when another connection spends the
producer's grant behind its back, the leader answers DELEGATION_TOKEN_EXPIRED, the producer
renews and sends the batches again, and with retries=0 nothing fails (a renewal is not a
failed attempt); a frame whose topic the grant on its connection does not cover (answered
TOPIC_AUTHORIZATION_FAILED) is retried through the gateway, whose answer decides, not failed;
and a leader change mid-stream moves the producer's frames to the new leader
with nothing lost or duplicated."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator

import pytest
from direct_client import DirectConnection, direct_counters, leader_of, produce_request
from shared_clusters import ClientCluster

from riverlog.client import AdminClient, Consumer, Producer
from riverlog.client.admin import NewTopic
from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode
from riverlog.common.records import BatchBuilder
from riverlog.common.types import TopicPartition

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TINY_GRANT_BYTES = 128 * 1024


def read_values(config: dict[str, str], topic: str, partition: int, count: int) -> list[bytes]:
    """The values of `topic`-`partition` from offset 0, until `count` arrived (bounded)."""
    tp = TopicPartition(topic, partition)
    out: list[bytes] = []
    with Consumer(config) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        deadline = time.monotonic() + 60
        while len(out) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(r.value or b"" for r in records)
    return out


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "gateway"])
def test_the_producer_takes_the_direct_path_where_the_cluster_offers_it(
    client_cluster: ClientCluster, direct: bool
) -> None:
    topic = client_cluster.new_topic(partitions=2)
    cluster = client_cluster.cluster
    offers = client_cluster.name == "plaintext"  # a TLS cluster has no direct access yet
    leaders = {leader_of(cluster, topic, p).node_id for p in range(2)}
    before = {n: direct_counters(cluster, n).bytes_written for n in leaders} if offers else {}
    values = [b"v-%04d" % i for i in range(300)]
    with Producer(client_cluster.config, direct_access=direct) as producer:
        futures = [producer.send(topic, v, partition=i % 2) for i, v in enumerate(values)]
        producer.flush(30)
        offsets = [f.result(10).offset for f in futures]
        metrics = producer.metrics()
    assert sorted(offsets) == sorted(list(range(150)) * 2)
    if direct and offers:
        assert metrics["direct-request-total"] > 0
        assert metrics["direct-grant-total"] >= len(leaders)
        after = {n: direct_counters(cluster, n).bytes_written for n in leaders}
        assert all(after[n] > before[n] for n in leaders), (before, after)
    else:
        assert metrics["direct-request-total"] == 0
    for p in range(2):
        assert read_values(client_cluster.config, topic, p, 150) == values[p::2]


@pytest.fixture(scope="module")
def tiny_grant_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """Two storage nodes whose gateway's grants cover 128 KiB each (direct.access.grant.bytes),
    so a producer renews often; its largest frame (max.request.size, batch.size, ~20 KiB
    here) must cost under a quarter of that (a grant paying for fewer keeps the gateway, as a
    quota's capped grant does). The tests here create their
    own topics only."""
    with LocalCluster(
        tmp_path_factory.mktemp("tiny-grants"),
        storage_nodes=2,
        metadata_nodes=1,
        gateways=1,
        extra_config={
            "gateway": {"direct.access.grant.bytes": str(TINY_GRANT_BYTES)},
            "storage": {"replica.fetch.wait.max.ms": "100"},
        },
    ) as local:
        yield local


def _topic(cluster: LocalCluster, partitions: int, replication: int) -> str:
    name = f"direct-produce-{time.monotonic_ns()}"
    with AdminClient(bootstrap_servers=cluster.gateway_address) as admin:
        admin.create_topics([NewTopic(name, partitions, replication)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            described = admin.describe_topics([name])[name]
            if all(p.leader >= 0 for p in described.partitions):
                return name
            time.sleep(0.05)
    raise AssertionError(f"{name} has no leaders")


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "acks1"])
def test_renewals_lose_and_duplicate_nothing(
    tiny_grant_cluster: LocalCluster, idempotent: bool
) -> None:
    topic = _topic(tiny_grant_cluster, partitions=2, replication=1)
    config = {"bootstrap.servers": tiny_grant_cluster.gateway_address}
    # Not idempotent: retries=0, so a renewal counted as a failed attempt would fail records.
    extra: dict[str, object] = (
        {"enable.idempotence": True} if idempotent else {"acks": 1, "retries": 0}
    )
    values = [b"%06d-" % i + b"x" * 400 for i in range(2000)]  # ~0.8 MB: a dozen grants
    with Producer(config, linger_ms=1, max_request_size=8192, **extra) as producer:
        futures = [producer.send(topic, v, partition=i % 2) for i, v in enumerate(values)]
        producer.flush(60)
        results = [f.result(10) for f in futures]
        metrics = producer.metrics()
    assert metrics["direct-renewal-total"] >= 4, metrics
    for p in range(2):
        assert [r.offset for r in results[p::2]] == list(range(1000))
        assert read_values(config, topic, p, 1000) == values[p::2]


def test_an_expired_answer_renews_and_resends_without_counting_an_attempt(
    tiny_grant_cluster: LocalCluster,
) -> None:
    cluster = tiny_grant_cluster
    topic = _topic(cluster, partitions=1, replication=1)
    config = {"bootstrap.servers": cluster.gateway_address}
    node = leader_of(cluster, topic)
    values = [b"exp-%04d" % i for i in range(400)]
    conf = {"acks": 1, "retries": 0, "linger_ms": 1, "max_request_size": 8192}
    with Producer(config, **conf) as producer:
        futures = [producer.send(topic, v) for v in values[:200]]
        producer.flush(30)
        direct = producer._sender.direct  # the grant it holds, to spend behind its back
        assert direct is not None
        current = direct.keeper._nodes[node.node_id].current
        assert current is not None
        grant = current.token
        builder = BatchBuilder()
        builder.append(1_700_000_000_000, None, b"s" * TINY_GRANT_BYTES)
        refusals = direct_counters(cluster, node.node_id).budget_refusals
        with DirectConnection(node.host, node.direct_port) as spender:
            assert spender.send_grant(grant).error_code == 0
            spent = spender.produce(produce_request(topic, builder.build()))
        # larger than the budget left: refused, nothing appended, and the budget emptied
        assert [p.error_code for p in spent.partitions] == [ErrorCode.DELEGATION_TOKEN_EXPIRED]
        futures += [producer.send(topic, v) for v in values[200:]]
        producer.flush(30)
        offsets = [f.result(10).offset for f in futures]  # retries=0: none failed
        metrics = producer.metrics()
    assert direct_counters(cluster, node.node_id).budget_refusals > refusals
    assert metrics["direct-renewal-total"] >= 1
    assert offsets == list(range(400))
    assert read_values(config, topic, 0, 400) == values


def test_a_direct_authorization_refusal_is_retried_via_the_gateway(
    tiny_grant_cluster: LocalCluster,
) -> None:
    # A renewal's grant frame refused, then frames for a topic only the new grant covers: the
    # node answers TOPIC_AUTHORIZATION_FAILED although the user is authorized. Made here by
    # making the keeper believe the connection's grant covers a second topic.
    cluster = tiny_grant_cluster
    first = _topic(cluster, 1, 1)
    node = leader_of(cluster, first).node_id
    for _ in range(20):  # a second topic on the same node (two nodes: soon)
        second = _topic(cluster, 1, 1)
        if leader_of(cluster, second).node_id == node:
            break
    else:
        raise AssertionError("no topic led by the first one's node")
    config = {"bootstrap.servers": cluster.gateway_address}
    values = [b"auth-%03d" % i for i in range(50)]
    with Producer(config, acks=1, retries=0, linger_ms=1, max_request_size=8192) as producer:
        producer.send(first, b"x").result(30)
        direct = producer._sender.direct
        assert direct is not None
        granted = direct.keeper._nodes[node]
        assert granted.current is not None
        granted.current = dataclasses.replace(
            granted.current, topics=granted.current.topics | {second}
        )
        futures = [producer.send(second, v) for v in values]
        producer.flush(30)
        offsets = [f.result(10).offset for f in futures]  # retries=0: none failed
    assert offsets == list(range(50))
    assert read_values(config, second, 0, 50) == values


def test_a_leader_change_mid_stream_moves_the_frames(tiny_grant_cluster: LocalCluster) -> None:
    cluster = tiny_grant_cluster
    topic = _topic(cluster, partitions=1, replication=2)
    config = {"bootstrap.servers": cluster.gateway_address}
    tp = TopicPartition(topic, 0)
    first = leader_of(cluster, topic).node_id
    with AdminClient(config) as admin:
        replicas = admin.describe_topics([topic])[topic].partitions[0].replicas
    other = next(n for n in replicas if n != first)
    values = [b"rec-%05d" % i for i in range(3000)]
    # largest frame under a quarter of the grants' 128 KiB: a larger one keeps the gateway
    with (
        Producer(config, linger_ms=1, max_request_size=8192) as producer,
        AdminClient(config) as admin,
    ):
        futures = [producer.send(topic, v) for v in values[:1500]]
        producer.flush(30)
        before = direct_counters(cluster, other).bytes_written
        admin.alter_partition_reassignments({tp: [other, first]})
        _until(lambda: not admin.list_partition_reassignments([tp]), "the reorder")

        def elected() -> bool:
            admin.elect_leaders("preferred", [tp])  # ELECTION_NOT_NEEDED once done
            return _leads(cluster, topic, other)

        _until(elected, f"node {other} leading")
        for v in values[1500:]:
            futures.append(producer.send(topic, v))
        producer.flush(60)
        offsets = [f.result(10).offset for f in futures]
        metrics = producer.metrics()
    assert offsets == list(range(3000))
    assert direct_counters(cluster, other).bytes_written > before  # the new leader, directly
    assert metrics["direct-grant-total"] >= 2  # one per leader
    assert read_values(config, topic, 0, 3000) == values


def _leads(cluster: LocalCluster, topic: str, node_id: int) -> bool:
    return bool(leader_of(cluster, topic).node_id == node_id)


def _until(done: Callable[[], object], what: str, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if done():
            return
        time.sleep(0.1)
    raise AssertionError(f"no {what} within {timeout_s} s")
