"""A storage node's direct port (decision 0047) through real processes, with a raw-socket client
(`direct_client.py`) and grants from the real gateway, on the session cluster (whose launcher
gives every gateway and storage node the cluster's direct-access key): a granted produce and
fetch work and move the node's direct counters; a first frame that is not a grant closes the
connection; a grant with a bad MAC or for another node is refused and the connection stays
ungranted; a partition of a topic the grant does not name, or of the other operation, is
answered TOPIC_AUTHORIZATION_FAILED and nothing is appended; once a grant's byte budget is
spent (a grant signed here with the cluster's key and a budget of one byte) frames are answered
DELEGATION_TOKEN_EXPIRED, and a renewed grant on the same connection works; an expired grant is
refused with DELEGATION_TOKEN_EXPIRED. And on a TLS cluster, which offers no direct access,
GrantDataAccess answers DELEGATION_TOKEN_AUTH_DISABLED."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from direct_client import (
    READ,
    WRITE,
    DirectConnection,
    ask_grant,
    direct_counters,
    fetch_request,
    leader_of,
    produce_request,
    storage_nodes,
)

from riverlog.cluster import LocalCluster
from riverlog.common.errors import ErrorCode
from riverlog.common.grants import GrantOperation, load_key, new_grant, sign_grant
from riverlog.common.records import BatchBuilder
from riverlog.common.records.header import iter_batches
from riverlog.common.zerocopy import KIND_FETCH, encode_frame
from riverlog.v1 import common_pb2

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NewTopic = Callable[..., str]


def _batch(count: int = 3, tag: bytes = b"r") -> bytes:
    builder = BatchBuilder()
    for i in range(count):
        builder.append(1_700_000_000_000 + i, tag + b"-k%d" % i, tag + b"-v%d" % i)
    return builder.build()


def _granted(cluster: LocalCluster, op: int, topics: list[str], node: common_pb2.Node) -> bytes:
    answer = ask_grant(cluster, op, topics, node.node_id)
    assert answer.error_code == ErrorCode.NONE, answer
    assert (answer.host, answer.direct_port) == (node.host, node.direct_port)
    assert answer.byte_budget > 0 and answer.expires_at_ms > time.time() * 1000
    return answer.grant


def _connect(node: common_pb2.Node) -> DirectConnection:
    assert node.direct_port > 0, "the session cluster's storage nodes advertise a direct port"
    return DirectConnection(node.host, node.direct_port)


def test_a_granted_produce_and_fetch_take_the_direct_port(
    cluster: LocalCluster, new_topic: NewTopic
) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    assert all(n.direct_port > 0 for n in storage_nodes(cluster).values())
    before = direct_counters(cluster, node.node_id)
    batch = _batch()
    with _connect(node) as conn:
        assert conn.send_grant(_granted(cluster, WRITE, [topic], node)).error_code == 0
        answer = conn.produce(produce_request(topic, batch))
    assert answer.correlation_id == 11
    assert [(p.error_code, p.base_offset) for p in answer.partitions] == [(0, 0)]
    with _connect(node) as conn:
        assert conn.send_grant(_granted(cluster, READ, [topic], node)).error_code == 0
        fetched = conn.fetch(fetch_request(topic))
    (part,) = fetched.partitions
    assert part.error_code == 0 and part.high_watermark == 3
    assert sum(b.records_count for b in iter_batches(part.records)) == 3
    after = direct_counters(cluster, node.node_id)
    assert after.connections >= before.connections + 2
    assert after.grants_accepted >= before.grants_accepted + 2
    assert after.bytes_written >= before.bytes_written + len(batch)
    assert after.bytes_read >= before.bytes_read + len(part.records)


def test_a_first_frame_that_is_not_a_grant_closes_the_connection(
    cluster: LocalCluster, new_topic: NewTopic
) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    with _connect(node) as conn:
        conn.sock.sendall(encode_frame(fetch_request(topic).SerializeToString(), KIND_FETCH))
        assert conn.closed_by_peer()


def test_a_bad_or_foreign_grant_is_refused_and_the_connection_stays_ungranted(
    cluster: LocalCluster, new_topic: NewTopic
) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    other = next(n for i, n in storage_nodes(cluster).items() if i != node.node_id)
    grant = _granted(cluster, READ, [topic], node)
    tampered = bytearray(grant)
    tampered[20] ^= 0x01
    before = direct_counters(cluster, node.node_id)
    with _connect(node) as conn:
        answer = conn.send_grant(bytes(tampered))
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, answer
        conn.sock.sendall(
            encode_frame(fetch_request(topic).SerializeToString(), KIND_FETCH)
        )  # still no grant: closed
        assert conn.closed_by_peer()
    with _connect(other) as conn:  # a grant for another node
        answer = conn.send_grant(grant)
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, answer
        assert "node" in answer.error_message
    assert direct_counters(cluster, node.node_id).grants_refused >= before.grants_refused + 1


def test_a_topic_or_operation_the_grant_does_not_cover_is_refused(
    cluster: LocalCluster, new_topic: NewTopic
) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    other = new_topic()
    with _connect(node) as conn:
        assert conn.send_grant(_granted(cluster, WRITE, [topic], node)).error_code == 0
        request = produce_request(topic, _batch(tag=b"a"))
        request.partitions.add(topic=other, partition=0, records=_batch(tag=b"b"))
        answer = conn.produce(request)
        assert [(p.topic, p.error_code) for p in answer.partitions] == [
            (topic, ErrorCode.NONE),
            (other, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ]
        refused = conn.fetch(fetch_request(topic))  # a WRITE grant does not read
        assert [p.error_code for p in refused.partitions] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
        assert not refused.partitions[0].records
        txn = produce_request(topic, _batch(tag=b"t"))
        txn.transactional_id = "direct-port-txn"
        (part,) = conn.produce(txn).partitions
        assert part.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    with _connect(node) as conn:
        assert conn.send_grant(_granted(cluster, READ, [topic], node)).error_code == 0
        fetched = conn.fetch(fetch_request(topic))
        assert [(p.error_code, p.high_watermark) for p in fetched.partitions] == [(0, 3)]
        follower = fetch_request(topic)
        follower.replica_id = node.node_id
        refused = conn.fetch(follower)
        assert [p.error_code for p in refused.partitions] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    other_node = leader_of(cluster, other)
    with _connect(other_node) as conn:  # nothing was appended to the refused topic
        assert conn.send_grant(_granted(cluster, READ, [other], other_node)).error_code == 0
        (part,) = conn.fetch(fetch_request(other)).partitions
        assert (part.error_code, part.high_watermark) == (0, 0)


def _signed_here(
    cluster: LocalCluster,
    node: common_pb2.Node,
    topic: str,
    *,
    budget: int,
    lifetime_ms: int = 60_000,
    now_ms: int | None = None,
) -> bytes:
    """A WRITE grant signed with the cluster's key file (as a gateway would), with a budget
    or lifetime no gateway config of the shared cluster gives."""
    assert cluster.direct_access_key is not None
    grant = new_grant(
        node_id=node.node_id,
        operation=GrantOperation.WRITE,
        principal="ANONYMOUS",
        client_id="direct-port-test",
        topics=frozenset({topic}),
        byte_budget=budget,
        now_ms=int(time.time() * 1000) if now_ms is None else now_ms,
        lifetime_ms=lifetime_ms,
    )
    return sign_grant(grant, load_key(cluster.direct_access_key))


def test_a_spent_budget_is_refused_until_a_renewed_grant(
    cluster: LocalCluster, new_topic: NewTopic
) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    before = direct_counters(cluster, node.node_id)
    with _connect(node) as conn:
        assert conn.send_grant(_signed_here(cluster, node, topic, budget=1)).error_code == 0
        first = conn.produce(produce_request(topic, _batch(tag=b"1")))  # overdraws the byte
        assert [p.error_code for p in first.partitions] == [ErrorCode.NONE]
        spent = conn.produce(produce_request(topic, _batch(tag=b"2")))
        assert [p.error_code for p in spent.partitions] == [ErrorCode.DELEGATION_TOKEN_EXPIRED]
        assert conn.send_grant(_granted(cluster, WRITE, [topic], node)).error_code == 0
        renewed = conn.produce(produce_request(topic, _batch(tag=b"3")))
        assert [(p.error_code, p.base_offset) for p in renewed.partitions] == [(0, 3)]
    after = direct_counters(cluster, node.node_id)
    assert after.budget_refusals >= before.budget_refusals + 1


def test_an_expired_grant_is_refused(cluster: LocalCluster, new_topic: NewTopic) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    an_hour_ago = int(time.time() * 1000) - 3_600_000
    expired = _signed_here(cluster, node, topic, budget=1 << 20, now_ms=an_hour_ago)
    with _connect(node) as conn:
        answer = conn.send_grant(expired)
        assert answer.error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED, answer


def test_the_gateway_refuses_bad_grant_requests(cluster: LocalCluster, new_topic: NewTopic) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    codes = {
        "no topics": ask_grant(cluster, READ, [], node.node_id).error_code,
        "bad name": ask_grant(cluster, READ, ["no spaces"], node.node_id).error_code,
        "no op": ask_grant(cluster, 0, [topic], node.node_id).error_code,
        "internal": ask_grant(cluster, WRITE, ["__consumer_offsets"], node.node_id).error_code,
        "no node": ask_grant(cluster, READ, [topic], 999).error_code,
    }
    assert codes == {
        "no topics": ErrorCode.INVALID_REQUEST,
        "bad name": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "no op": ErrorCode.INVALID_REQUEST,
        "internal": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "no node": ErrorCode.UNKNOWN_NODE,
    }


def test_a_tls_cluster_offers_no_direct_access(tls_cluster: LocalCluster) -> None:
    assert tls_cluster.direct_access_key is None
    nodes = storage_nodes(tls_cluster)
    assert nodes and all(n.direct_port == 0 for n in nodes.values())
    answer = ask_grant(tls_cluster, READ, ["any-topic"], next(iter(nodes)))
    assert answer.error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED, answer
    assert not answer.grant
