"""A direct-port connection's grant checks (decision 0047) without sockets: the ledger's budget
per grant id (shared by connections, paid before a frame is served: a produce frame never
overdraws it, a fetch reserves and settles and overdraws by at most its first batch; every
frame costs FRAME_CHARGE_BYTES more; forgotten after expiry), the screening of fetch and
produce frames (other topics, other operation, a follower's fetch, a transactional produce, a
spent or expired grant, waits capped by expiry) and the answers put back in request order, by
position."""

from __future__ import annotations

import asyncio

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode
from riverlog.common.grants import FRAME_CHARGE_BYTES, GrantOperation, new_grant, sign_grant
from riverlog.common.produce_request_parse import (
    ParsedProducePartition,
    ParsedProduceRequest,
)
from riverlog.common.types import TopicPartition
from riverlog.services.storage.grants import GrantLedger
from riverlog.services.storage.replica.requests import FetchPartitionResult
from riverlog.services.storage.rpc.direct import (
    MAX_DIRECT_WAIT_MS,
    DirectSession,
    in_order,
    with_refusals,
)
from riverlog.v1 import data_pb2

KEY = b"s" * 32
NODE = 2
C = FRAME_CHARGE_BYTES


class _Records:
    """Stored records of a size (what the ledger charges)."""

    def __init__(self, size: int) -> None:
        self.size = size

    def to_bytes(self) -> bytes:
        return b"x" * self.size

    def close(self) -> None:
        pass


def _read(topic: str, size: int) -> FetchPartitionResult:
    return FetchPartitionResult(TopicPartition(topic, 0), records=_Records(size))


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


def test_fetch_screening_keeps_order_reserves_and_settles_before_sending() -> None:
    clock = ManualClock()
    ledger, session = _session(clock)
    session.take_grant(_grant(clock, GrantOperation.READ, budget=10 + C + 300))
    request = _fetch("a", "zzz", "b", "a")  # "a" twice
    order = [TopicPartition(p.topic, p.partition) for p in request.partitions]
    refused = session.screen_fetch(request, 10)
    assert [p.topic for p in request.partitions] == ["a", "b", "a"]
    assert request.max_bytes == 300  # all that is left, reserved
    assert ledger.remaining(session.grant) == 0  # type: ignore[arg-type]
    assert [(i, r.tp.topic, r.error) for i, r in refused] == [
        (1, "zzz", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ]
    # another connection under the grant now finds nothing left
    other = DirectSession(ledger)
    other.take_grant(_grant(clock, GrantOperation.READ, budget=1))
    other.grant = session.grant
    assert [r.error for _, r in other.screen_fetch(_fetch("a"), 10)] == [
        ErrorCode.DELEGATION_TOKEN_EXPIRED
    ]
    done = [_read("a", 100), _read("b", 0), _read("a", 50)]
    assert [r.tp.topic for r in in_order(order, done, refused)] == ["a", "zzz", "b", "a"]
    session.settle_fetch(done)  # 150 read of 300 reserved: 150 back
    assert ledger.remaining(session.grant) == 150  # type: ignore[arg-type]
    assert ledger.bytes_read == 150


def test_a_first_batch_larger_than_the_reservation_is_charged_whole() -> None:
    clock = ManualClock()
    ledger, session = _session(clock)
    session.take_grant(_grant(clock, GrantOperation.READ, budget=10 + C + 300))
    session.screen_fetch(_fetch("a"), 10)
    session.settle_fetch([_read("a", 1000)])
    assert ledger.remaining(session.grant) == -700  # type: ignore[arg-type]
    spent = _fetch("a")
    assert [r.error for _, r in session.screen_fetch(spent, 10)] == [
        ErrorCode.DELEGATION_TOKEN_EXPIRED
    ]
    assert not spent.partitions


def test_empty_fetches_pay_the_frame_charge() -> None:
    clock = ManualClock()
    ledger, session = _session(clock)
    session.take_grant(_grant(clock, GrantOperation.READ, budget=2 * (10 + C) + 5))
    for _ in range(2):
        assert not session.screen_fetch(_fetch("a"), 10)
        session.settle_fetch([_read("a", 0)])
    assert ledger.remaining(session.grant) == 5  # type: ignore[arg-type]
    assert [r.error for _, r in session.screen_fetch(_fetch("a"), 10)] == [
        ErrorCode.DELEGATION_TOKEN_EXPIRED
    ]
    assert ledger.remaining(session.grant) == 0  # type: ignore[arg-type]


def test_waits_are_capped_by_the_grants_expiry_and_a_negative_max_bytes_is_kept() -> None:
    clock = ManualClock()
    _, session = _session(clock)
    session.take_grant(_grant(clock, GrantOperation.READ, budget=10_000, life=60_000))
    request = _fetch("a")
    request.max_wait_ms, request.max_bytes = 600_000, -1
    session.screen_fetch(request, 10)
    assert request.max_wait_ms == MAX_DIRECT_WAIT_MS
    assert request.max_bytes == -1  # the fetch answers INVALID_REQUEST
    session.settle_fetch([])
    clock.advance(59_000)
    later = _fetch("a")
    later.max_wait_ms = 5_000
    session.screen_fetch(later, 10)
    assert later.max_wait_ms == 1_000
    _, writer = _session(clock)
    writer.take_grant(_grant(clock, GrantOperation.WRITE, budget=10_000, life=2_000))
    produce = _produce("a")
    produce.timeout_ms = 0  # the node's default: capped as well
    assert not writer.screen_produce(produce, 60)
    assert produce.timeout_ms == 2_000


def test_a_write_grant_does_not_fetch_and_a_follower_fetch_is_refused() -> None:
    clock = ManualClock()
    _, session = _session(clock)
    session.take_grant(_grant(clock, GrantOperation.WRITE))
    assert [r.error for _, r in session.screen_fetch(_fetch("a"), 10)] == [
        ErrorCode.TOPIC_AUTHORIZATION_FAILED
    ]
    _, reader = _session(clock)
    reader.take_grant(_grant(clock, GrantOperation.READ, budget=10_000))
    follower = _fetch("a")
    follower.replica_id = 1
    assert [r.error for _, r in reader.screen_fetch(follower, 10)] == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    ]


def test_produce_screening_charges_frames_and_refuses_what_the_grant_does_not_cover() -> None:
    clock = ManualClock()
    ledger, session = _session(clock)
    session.take_grant(_grant(clock, GrantOperation.WRITE, budget=2 * (60 + C) + 50))
    request = _produce("a", "zzz")
    refused = session.screen_produce(request, 60)
    assert [p.topic for p in request.partitions] == ["a"]
    assert [(i, p.topic, p.error_code) for i, p in refused] == [
        (1, "zzz", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    ]
    assert ledger.bytes_written == 60
    txn = _produce("a", txn="t1")
    assert [p.error_code for _, p in session.screen_produce(txn, 60)] == [
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    ]
    assert ledger.bytes_written == 60  # nothing left to append: nothing charged
    assert ledger.remaining(session.grant) == 60 + C + 50  # type: ignore[arg-type]
    large = _produce("a", "b")
    assert [(i, p.error_code) for i, p in session.screen_produce(large, 60 + 51)] == [
        (0, ErrorCode.DELEGATION_TOKEN_EXPIRED),
        (1, ErrorCode.DELEGATION_TOKEN_EXPIRED),
    ]
    assert not large.partitions and ledger.remaining(session.grant) == 0  # type: ignore[arg-type]
    small = _produce("a")  # the refusal empties the budget: it sticks
    assert [p.error_code for _, p in session.screen_produce(small, 1)] == [
        ErrorCode.DELEGATION_TOKEN_EXPIRED
    ]


def test_connections_with_one_grant_share_its_budget_and_expiry_ends_it() -> None:
    clock = ManualClock()
    ledger = GrantLedger(KEY, NODE, clock)
    grant = _grant(clock, GrantOperation.WRITE, budget=2 * (10 + C) + 5, life=1_000)
    one, two = DirectSession(ledger), DirectSession(ledger)
    one.take_grant(grant)
    two.take_grant(grant)
    assert not one.screen_produce(_produce("a"), 10)
    assert not two.screen_produce(_produce("a"), 10)
    assert [p.error_code for _, p in one.screen_produce(_produce("a"), 1)] == [
        ErrorCode.DELEGATION_TOKEN_EXPIRED
    ]
    fresh = DirectSession(ledger)
    fresh.take_grant(_grant(clock, GrantOperation.WRITE, budget=10 * C, life=5_000))
    clock.advance(1_000)
    assert _answer(DirectSession(ledger).take_grant(grant)).error_code == (
        ErrorCode.DELEGATION_TOKEN_EXPIRED
    )
    assert ledger.live_grants == 1  # the expired one was forgotten at the next grant
    assert not fresh.screen_produce(_produce("a"), 1)
    clock.advance(4_000)
    assert [p.error_code for _, p in fresh.screen_produce(_produce("a"), 1)] == [
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
            (0, data_pb2.ProducePartitionResponse(topic="a", partition=0, error_code=29)),  # type: ignore[arg-type]
            (2, data_pb2.ProducePartitionResponse(topic="a", partition=0, error_code=29)),  # type: ignore[arg-type]
        ]
        order = [TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("a", 0)]
        merged = with_refusals(ready, refused, order)
        assert isinstance(merged, asyncio.Future) and merged.done()  # still inline
        response = await merged
        assert response.correlation_id == 5
        return [(p.topic, p.error_code) for p in response.partitions]

    assert asyncio.run(run()) == [("a", 29), ("b", 0), ("a", 29)]
