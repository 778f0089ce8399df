"""A storage node's direct port (decision 0047) through real processes, with a raw-socket client
(`direct_client.py`) and grants from the real gateway, on the session cluster (whose launcher
gives every gateway and storage node the cluster's direct-access key): a granted produce and
fetch work and move the node's direct counters; a first frame that is not a grant closes the
connection; a grant with a bad MAC or for another node is refused, and closes a connection that
holds no grant (one that holds a grant keeps it); a partition of a topic the grant does not
name, or of the other operation, is answered TOPIC_AUTHORIZATION_FAILED and nothing is appended
(in its place, even when the frame names a partition twice); a follower's fetch is answered
CLUSTER_AUTHORIZATION_FAILED and a negative max_bytes INVALID_REQUEST. The byte budget (grants
signed here with the cluster's key, with budgets and lifetimes no gateway config gives): a
produce frame larger than the budget left is answered DELEGATION_TOKEN_EXPIRED and nothing is
appended, and a renewed grant on the same connection works (its answer comes after the answers
of the produce frames pipelined before it); concurrent fetches on one grant read at most the
budget and a batch each; a fetch whose client resets the connection mid-answer was paid for;
empty fetches are paid for; a long poll ends by its grant's expiry; an expired grant is refused
with DELEGATION_TOKEN_EXPIRED. And on a TLS cluster, which offers no direct access,
GrantDataAccess answers DELEGATION_TOKEN_AUTH_DISABLED."""

from __future__ import annotations

import os
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
from riverlog.common.grants import (
    FRAME_CHARGE_BYTES,
    GrantOperation,
    load_key,
    new_grant,
    sign_grant,
)
from riverlog.common.records import BatchBuilder
from riverlog.common.records.header import iter_batches
from riverlog.common.zerocopy import (
    KIND_FETCH,
    KIND_GRANT,
    KIND_PRODUCE,
    encode_frame,
    records_total,
)
from riverlog.v1 import common_pb2, data_pb2

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


def test_a_bad_or_foreign_grant_is_refused_and_closes_an_ungranted_connection(
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
        assert conn.closed_by_peer()  # no grant on it: answered, then closed
    with _connect(other) as conn:  # a grant for another node
        answer = conn.send_grant(grant)
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, answer
        assert "node" in answer.error_message
        assert conn.closed_by_peer()
    with _connect(node) as conn:  # a connection holding a grant keeps it
        assert conn.send_grant(grant).error_code == ErrorCode.NONE
        assert conn.send_grant(bytes(tampered)).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert [p.error_code for p in conn.fetch(fetch_request(topic)).partitions] == [0]
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
        assert [p.error_code for p in refused.partitions] == [
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        ]
        negative = fetch_request(topic)
        negative.max_bytes = -1
        invalid = conn.fetch(negative)
        assert [p.error_code for p in invalid.partitions] == [ErrorCode.INVALID_REQUEST]
        twice = fetch_request(topic)  # a partition named twice, a refused topic between
        twice.partitions.add(topic=other, partition=0, fetch_offset=0)
        twice.partitions.add(topic=topic, partition=0, fetch_offset=1)
        answer = conn.fetch(twice)
        assert [(p.topic, p.error_code) for p in answer.partitions] == [
            (topic, ErrorCode.NONE),
            (other, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
            (topic, ErrorCode.NONE),
        ]
        first, refused_between, again = answer.partitions
        assert sum(b.records_count for b in iter_batches(first.records)) == 3
        assert not refused_between.records
        assert sum(b.records_count for b in iter_batches(again.records)) == 3
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
    operation: GrantOperation = GrantOperation.WRITE,
) -> bytes:
    """A grant (WRITE unless told) signed with the cluster's key file (as a gateway would),
    with a budget or lifetime no gateway config of the shared cluster gives."""
    assert cluster.direct_access_key is not None
    grant = new_grant(
        node_id=node.node_id,
        operation=operation,
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
    small = _signed_here(cluster, node, topic, budget=1)
    large = produce_request(topic, _batch(count=2000, tag=b"large"))
    with _connect(node) as conn, _connect(node) as second:
        assert conn.send_grant(small).error_code == 0
        assert second.send_grant(small).error_code == 0  # the same grant, another connection
        spent = conn.produce(large)  # larger than the budget left: nothing appended
        assert [p.error_code for p in spent.partitions] == [ErrorCode.DELEGATION_TOKEN_EXPIRED]
        tiny = second.produce(produce_request(topic, _batch(tag=b"2")))  # the budget is gone
        assert [p.error_code for p in tiny.partitions] == [ErrorCode.DELEGATION_TOKEN_EXPIRED]
        assert conn.send_grant(_granted(cluster, WRITE, [topic], node)).error_code == 0
        renewed = conn.produce(produce_request(topic, _batch(tag=b"3")))
        assert [(p.error_code, p.base_offset) for p in renewed.partitions] == [(0, 0)]
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


def test_a_renewal_is_answered_after_the_answers_owed_before_it(
    cluster: LocalCluster, new_topic: NewTopic
) -> None:
    topic = new_topic(replication_factor=3)  # acks=all answers wait for the followers
    node = leader_of(cluster, topic)
    with _connect(node) as conn:
        assert conn.send_grant(_granted(cluster, WRITE, [topic], node)).error_code == 0
        frames = []
        for correlation_id in (1, 2):
            request = produce_request(topic, _batch(tag=b"%d" % correlation_id))
            request.acks = common_pb2.ACKS_ALL
            request.correlation_id = correlation_id
            frames.append(encode_frame(request.SerializeToString(), KIND_PRODUCE))
        frames.append(encode_frame(_granted(cluster, WRITE, [topic], node), KIND_GRANT))
        conn.sock.sendall(b"".join(frames))  # pipelined: the grant behind two produce frames
        answers = [conn.read_payload() for _ in range(3)]
    produced = [data_pb2.ProduceResponse.FromString(a) for a in answers[:2]]
    assert sorted(p.correlation_id for p in produced) == [1, 2]
    assert all(p.partitions[0].error_code == 0 for p in produced)
    assert data_pb2.DataGrantResponse.FromString(answers[2]).error_code == 0


def _fill(cluster: LocalCluster, node: common_pb2.Node, topic: str, batches: list[bytes]) -> None:
    with _connect(node) as conn:
        assert conn.send_grant(_granted(cluster, WRITE, [topic], node)).error_code == 0
        for batch in batches:
            answer = conn.produce(produce_request(topic, batch))
            assert [p.error_code for p in answer.partitions] == [ErrorCode.NONE]


def _sized_batch(index: int, value_bytes: int) -> bytes:
    builder = BatchBuilder()
    builder.append(1_700_000_000_000, b"k%04d" % index, os.urandom(value_bytes))
    return builder.build()


def test_concurrent_fetches_on_one_grant_read_the_budget_and_a_batch_each_at_most(
    cluster: LocalCluster, new_topic: NewTopic
) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    batches = [_sized_batch(i, 16_000) for i in range(24)]
    _fill(cluster, node, topic, batches)
    budget = 64 * 1024
    grant = _signed_here(cluster, node, topic, budget=budget, operation=GrantOperation.READ)
    request = fetch_request(topic)  # a long poll, parked until max_wait: all at once
    request.max_wait_ms, request.min_bytes, request.max_bytes = 500, 1 << 30, 0
    conns = [_connect(node) for _ in range(4)]
    try:
        for conn in conns:
            assert conn.send_grant(grant).error_code == 0
        for conn in conns:
            conn.send_fetch(request)
        answers = [conn.read_fetch() for conn in conns]
    finally:
        for conn in conns:
            conn.close()
    read = sum(len(p.records) for a in answers for p in a.partitions)
    assert 0 < read <= budget + len(conns) * max(map(len, batches))
    codes = sorted(p.error_code for a in answers for p in a.partitions)
    assert ErrorCode.DELEGATION_TOKEN_EXPIRED in codes, codes  # the rest was reserved


def test_a_fetch_reset_mid_answer_was_paid_for(cluster: LocalCluster, new_topic: NewTopic) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    batches = [_sized_batch(i, 500_000) for i in range(12)]  # 6 MB: more than a socket holds
    _fill(cluster, node, topic, batches)
    request = fetch_request(topic)
    request.max_bytes = 0  # all the budget allows: every batch, exactly
    budget = len(request.SerializeToString()) + FRAME_CHARGE_BYTES + sum(map(len, batches))
    grant = _signed_here(cluster, node, topic, budget=budget, operation=GrantOperation.READ)
    conn = DirectConnection(node.host, node.direct_port, rcvbuf=4096)
    try:
        assert conn.send_grant(grant).error_code == 0
        conn.send_fetch(request)
        head = data_pb2.FetchResponse.FromString(conn.read_payload())
        assert records_total(head) == sum(map(len, batches))
        conn.recv_exactly(1000)  # some of the records, then a reset
    finally:
        conn.reset()
    with _connect(node) as conn:
        assert conn.send_grant(grant).error_code == 0
        (part,) = conn.fetch(fetch_request(topic)).partitions
        assert part.error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED, part.error_message


def test_empty_fetches_are_paid_for(cluster: LocalCluster, new_topic: NewTopic) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    request = fetch_request(topic)
    cost = len(request.SerializeToString()) + FRAME_CHARGE_BYTES
    grant = _signed_here(cluster, node, topic, budget=3 * cost + 100, operation=GrantOperation.READ)
    with _connect(node) as conn:
        assert conn.send_grant(grant).error_code == 0
        codes = [conn.fetch(request).partitions[0].error_code for _ in range(4)]
    assert codes == [0, 0, 0, ErrorCode.DELEGATION_TOKEN_EXPIRED]


def test_a_long_poll_ends_by_its_grant_expiry(cluster: LocalCluster, new_topic: NewTopic) -> None:
    topic = new_topic()
    node = leader_of(cluster, topic)
    grant = _signed_here(
        cluster, node, topic, budget=1 << 20, lifetime_ms=1000, operation=GrantOperation.READ
    )
    request = fetch_request(topic)  # an empty topic: it would wait the whole max_wait
    request.max_wait_ms, request.min_bytes = 600_000, 1 << 30
    with _connect(node) as conn:  # its timeout (15 s) is below the 30 s cap: expiry ends it
        if conn.send_grant(grant).error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED:
            return  # expired on the way (a slow machine): nothing to wait for
        (part,) = conn.fetch(request).partitions
    assert part.error_code in (ErrorCode.NONE, ErrorCode.DELEGATION_TOKEN_EXPIRED), part
    assert not part.records
