"""A direct-port connection's grant checks (decision 0047) without sockets: the ledger's budget
per grant id (shared by connections, overdrawn by at most one frame, forgotten after expiry),
the screening of fetch and produce frames (other topics, other operation, a follower's fetch, a
transactional produce, a spent or expired grant) and the answers put back in request order."""

from __future__ import annotations

import asyncio

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode
from riverlog.common.grants import GrantOperation, new_grant, sign_grant
from riverlog.common.produce_request_parse import (
    ParsedProducePartition,
    ParsedProduceRequest,
)
from riverlog.common.types import TopicPartition
from riverlog.services.storage.grants import GrantLedger
from riverlog.services.storage.rpc.direct import DirectSession, in_order, with_refusals
from riverlog.v1 import data_pb2

KEY = b"s" * 32
NODE = 2


def _grant(clock: ManualClock, op: GrantOperation, budget: int = 1000, life: int = 60_000) -> bytes:
    return sign_grant(
        new_grant(
            node_id=NODE,
            operation=op,
            principal="alice",
            client_id="c",
            topics=frozenset({"a", "b"}),
            byte_budget=budget,
            now_ms=clock.time_ms(),
            lifetime_ms=life,
        ),
        KEY,
    )


def _answer(frame: bytes) -> data_pb2.DataGrantResponse:
    answer = data_pb2.DataGrantResponse()
    answer.ParseFromString(frame[4:])
    return answer


def _session(clock: ManualClock) -> tuple[GrantLedger, DirectSession]:
    ledger = GrantLedger(KEY, NODE, clock)
    return ledger, DirectSession(ledger)


def _fetch(*topics: str) -> data_pb2.FetchRequest:
    return data_pb2.FetchRequest(
        max_bytes=1 << 20,
        partitions=[data_pb2.FetchPartition(topic=t, partition=0) for t in topics],
    )


def _produce(*topics: str, txn: str = "") -> ParsedProduceRequest:
    return ParsedProduceRequest(
        acks=1,
        partitions=[
            ParsedProducePartition(topic=t, partition=0, records=memoryview(b"x" * 10))
            for t in topics
        ],
        transactional_id=txn,
        correlation_id=5,
    )


def test_grant_frames_set_and_keep_the_connections_grant() -> None:
    clock = ManualClock()
    ledger, session = _session(clock)
    assert (
        _answer(session.take_grant(b"garbage")).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    )
    assert session.grant is None
    assert _answer(session.take_grant(_grant(clock, GrantOperation.READ))).error_code == 0
    first = session.grant
    assert first is not None
    # a refused renewal keeps the grant in place
    assert (
        _answer(session.take_grant(b"x" * 200)).error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    )
    assert session.grant is first
    assert (ledger.accepted, ledger.refused) == (1, 2)


def test_fetch_screening_keeps_order_and_caps_max_bytes() -> None:
    clock = ManualClock()
    ledger, session = _session(clock)
    session.take_grant(_grant(clock, GrantOperation.READ, budget=300))
    request = _fetch("a", "zzz", "b")
    order = [TopicPartition(p.topic, p.partition) for p in request.partitions]
    refused = session.screen_fetch(request)
    assert [p.topic for p in request.partitions] == ["a", "b"]
    assert request.max_bytes == 300
    assert [(r.tp.topic, r.error) for r in refused] == [
        ("zzz", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ]
    from riverlog.services.storage.replica.requests import FetchPartitionResult

    done = [
        FetchPartitionResult(TopicPartition("a", 0)),
        FetchPartitionResult(TopicPartition("b", 0)),
    ]
    assert [r.tp.topic for r in in_order(order, done, refused)] == ["a", "zzz", "b"]
    session.charge(350)  # a fetch may overdraw by what it returned
    assert ledger.remaining(session.grant) == -50  # type: ignore[arg-type]
    spent = _fetch("a")
    assert [r.error for r in session.screen_fetch(spent)] == [ErrorCode.DELEGATION_TOKEN_EXPIRED]
    assert not spent.partitions
    assert ledger.bytes_read == 350 and ledger.exhausted == 1


def test_a_write_grant_does_not_fetch_and_a_follower_fetch_is_refused() -> None:
    clock = ManualClock()
    _, session = _session(clock)
    session.take_grant(_grant(clock, GrantOperation.WRITE))
    assert [r.error for r in session.screen_fetch(_fetch("a"))] == [
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    ]
    _, reader = _session(clock)
    reader.take_grant(_grant(clock, GrantOperation.READ))
    follower = _fetch("a")
    follower.replica_id = 1
    assert [r.error for r in reader.screen_fetch(follower)] == [
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    ]


def test_produce_screening_charges_frames_and_refuses_what_the_grant_does_not_cover() -> None:
    clock = ManualClock()
    ledger, session = _session(clock)
    session.take_grant(_grant(clock, GrantOperation.WRITE, budget=100))
    request = _produce("a", "zzz")
    refused = session.screen_produce(request, 60)
    assert [p.topic for p in request.partitions] == ["a"]
    assert [(p.topic, p.error_code) for p in refused] == [
        ("zzz", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ]
    assert ledger.bytes_written == 60
    txn = _produce("a", txn="t1")
    assert [p.error_code for p in session.screen_produce(txn, 60)] == [
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    ]
    assert ledger.bytes_written == 60  # nothing left to append: nothing charged
    session.screen_produce(_produce("b"), 60)  # overdraws: 100 - 120
    spent = _produce("a")
    assert [p.error_code for p in session.screen_produce(spent, 60)] == [
        ErrorCode.DELEGATION_TOKEN_EXPIRED
    ]
    assert not spent.partitions and ledger.remaining(session.grant) == -20  # type: ignore[arg-type]


def test_connections_with_one_grant_share_its_budget_and_expiry_ends_it() -> None:
    clock = ManualClock()
    ledger = GrantLedger(KEY, NODE, clock)
    grant = _grant(clock, GrantOperation.WRITE, budget=100, life=1_000)
    one, two = DirectSession(ledger), DirectSession(ledger)
    one.take_grant(grant)
    two.take_grant(grant)
    one.screen_produce(_produce("a"), 70)
    two.screen_produce(_produce("a"), 70)
    assert [p.error_code for p in one.screen_produce(_produce("a"), 1)] == [
        ErrorCode.DELEGATION_TOKEN_EXPIRED
    ]
    fresh = DirectSession(ledger)
    fresh.take_grant(_grant(clock, GrantOperation.WRITE, budget=100, life=5_000))
    clock.advance(1_000)
    assert _answer(DirectSession(ledger).take_grant(grant)).error_code == (
        ErrorCode.DELEGATION_TOKEN_EXPIRED
    )
    assert ledger.live_grants == 1  # the expired one was forgotten at the next grant
    assert not fresh.screen_produce(_produce("a"), 1)
    clock.advance(4_000)
    assert [p.error_code for p in fresh.screen_produce(_produce("a"), 1)] == [
        ErrorCode.DELEGATION_TOKEN_EXPIRED
    ]


def test_refusals_are_merged_into_the_answer_in_request_order() -> None:
    async def run() -> list[tuple[str, int]]:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[data_pb2.ProduceResponse] = loop.create_future()
        ready.set_result(
            data_pb2.ProduceResponse(
                correlation_id=5,
                partitions=[data_pb2.ProducePartitionResponse(topic="b", partition=0)],
            )
        )
        refused = [
            data_pb2.ProducePartitionResponse(topic="a", partition=0, error_code=29),  # type: ignore[arg-type]
        ]
        order = [TopicPartition("a", 0), TopicPartition("b", 0)]
        merged = with_refusals(ready, refused, order)
        assert isinstance(merged, asyncio.Future) and merged.done()  # still inline
        response = await merged
        assert response.correlation_id == 5
        return [(p.topic, p.error_code) for p in response.partitions]

    assert asyncio.run(run()) == [("a", 29), ("b", 0)]
