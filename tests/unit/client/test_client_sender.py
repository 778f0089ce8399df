"""The sender's delivery semantics against a fake gateway with injected failures: retriable
errors are retried (refreshing metadata when the error says so) and non-retriable ones fail the
record's future with that error; one partition's error does not fail another's; a transport
failure moves to the next gateway; retries and delivery.timeout.ms bound the attempts; acks=0
neither checks nor retries, and keeps a partition's order; max.in.flight=1 keeps order across
retries."""

from __future__ import annotations

from collections import deque

import grpc
import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import ClientTimeoutError, Producer, RiverlogError
from riverlog.common.errors import ErrorCode
from riverlog.common.records.reader import iter_batches_records

FAST = {"linger.ms": 0, "retry.backoff.ms": 5, "retry.backoff.max.ms": 20}


def producer(*addresses: str, **config: object) -> Producer:
    return Producer({"bootstrap.servers": ",".join(addresses), **FAST}, **config)


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ],
)
def test_retriable_errors_are_retried(
    fake: FakeServer, gateway: FakeGateway, code: ErrorCode
) -> None:
    gateway.create("t", 1)
    gateway.produce_errors.extend([code] * 3)
    with producer(fake.address) as p:
        assert p.send("t", b"v").result(10).offset == 0
    assert len(gateway.produce_requests) == 4


def test_refresh_metadata_errors_refresh_it(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    with producer(fake.address) as p:
        p.send("t", b"v").result(10)
        calls = gateway.metadata_calls
        gateway.produce_errors.append(ErrorCode.NOT_LEADER_OR_FOLLOWER)  # refresh_metadata
        p.send("t", b"v").result(10)
        p.send("t", b"v").result(10)  # the next send looks the topic up again
        assert gateway.metadata_calls == calls + 1
        gateway.produce_errors.append(ErrorCode.NOT_ENOUGH_REPLICAS)  # no refresh
        p.send("t", b"v").result(10)
        p.send("t", b"v").result(10)
        assert gateway.metadata_calls == calls + 1


@pytest.mark.parametrize(
    "code",
    [ErrorCode.INVALID_RECORD, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.TOPIC_AUTHORIZATION_FAILED],
)
def test_non_retriable_errors_fail_the_future(
    fake: FakeServer, gateway: FakeGateway, code: ErrorCode
) -> None:
    gateway.create("t", 1)
    gateway.produce_errors.append(code)
    with producer(fake.address) as p:
        future = p.send("t", b"v")
        with pytest.raises(RiverlogError) as info:
            future.result(10)
        assert future.exception() is info.value
    assert info.value.code == code and not info.value.retriable
    assert len(gateway.produce_requests) == 1


def test_one_partition_error_does_not_fail_another(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 2)
    gateway.partition_errors[("t", 1)] = deque([ErrorCode.INVALID_RECORD])
    with producer(fake.address, linger_ms=10_000) as p:
        ok = p.send("t", b"v", partition=0)
        bad = p.send("t", b"v", partition=1)
        p.flush()
    assert ok.result(0).offset == 0
    assert isinstance(bad.exception(0), RiverlogError)
    assert bad.exception(0).code == ErrorCode.INVALID_RECORD  # type: ignore[union-attr]
    assert len(gateway.produce_requests) == 1


def test_retries_zero_fails_on_the_first_retriable_error(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)
    gateway.produce_errors.append(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    with producer(fake.address, retries=0) as p:
        with pytest.raises(RiverlogError, match="NOT_LEADER_OR_FOLLOWER"):
            p.send("t", b"v").result(10)


def test_delivery_timeout_fails_with_a_clear_error(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    gateway.produce_errors.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER] * 100_000)
    with producer(fake.address, request_timeout_ms=100, delivery_timeout_ms=300) as p:
        with pytest.raises(ClientTimeoutError, match=r"expiring 1 record\(s\) for t-0") as info:
            p.send("t", b"v").result(30)
    assert "delivery.timeout.ms 300" in str(info.value)
    assert "NOT_LEADER_OR_FOLLOWER" in str(info.value)  # the last error is named


def test_transport_failure_moves_to_the_next_gateway(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    second = FakeServer()
    try:
        for g in (gateway, second.gateway):
            g.create("t", 1)
        gateway.produce_errors.append(grpc.StatusCode.UNAVAILABLE)
        with producer(fake.address, second.address, client_id="c") as p:
            assert p.send("t", b"v").result(10).offset == 0
        assert len(second.gateway.produce_requests) == 1
        assert len(list(iter_batches_records(second.gateway.records("t", 0)))) == 1
        assert second.gateway.seen_client_ids == {"c"}
    finally:
        second.stop()


def test_unreachable_first_gateway_fails_over_for_metadata(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    dead = FakeServer()
    dead_address = dead.address
    dead.stop()
    gateway.create("t", 1)
    with producer(dead_address, fake.address) as p:
        assert p.send("t", b"v").result(10).offset == 0


def test_deadline_exceeded_is_retried(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    gateway.produce_errors.append(grpc.StatusCode.DEADLINE_EXCEEDED)
    with producer(fake.address) as p:
        assert p.send("t", b"v").result(10).offset == 0


def test_acks_zero_neither_checks_nor_retries(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    gateway.produce_errors.append(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    with producer(fake.address, acks=0) as p:
        assert p.send("t", b"v").result(10).offset == -1  # sent, nothing acknowledged
    assert len(gateway.produce_requests) == 1


def test_acks_zero_keeps_a_partitions_order(fake: FakeServer, gateway: FakeGateway) -> None:
    """acks=0 requests go as unary calls, between which gRPC keeps no order: a partition's
    next request waits for the answer to the one before (the leader took it), so one held
    at the gateway is not overtaken (test_each_acks_setting[asyncio-0] got records out of
    order: several small batches in flight while the gateway retried the first)."""
    gateway.create("t", 1)
    gateway.hold_next_acks_zero_s = 0.5  # the fake lets a request that arrives meanwhile pass
    with producer(fake.address, acks=0) as p:
        futures = [p.send("t", b"0", partition=0)]
        assert gateway.holding.wait(10)  # the first request is at the gateway, held
        futures += [p.send("t", b"%d" % i, partition=0) for i in range(1, 10)]
        p.flush()
    assert [f.result(0).offset for f in futures] == [-1] * 10
    values = [r.value for r in iter_batches_records(gateway.records("t", 0))]
    assert values == [b"%d" % i for i in range(10)]


def test_one_in_flight_keeps_order_across_retries(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    gateway.produce_errors.extend([ErrorCode.NOT_LEADER_OR_FOLLOWER] * 2)
    with producer(fake.address, max_in_flight_requests_per_connection=1, batch_size=300) as p:
        futures = [p.send("t", b"%03d" % i + b"." * 60, partition=0) for i in range(50)]
        p.flush()
    assert [f.result(0).offset for f in futures] == list(range(50))
    values = [r.value[:3] for r in iter_batches_records(gateway.records("t", 0))]
    assert values == [b"%03d" % i for i in range(50)]


def test_callbacks_get_errors_too(fake: FakeServer, gateway: FakeGateway) -> None:
    gateway.create("t", 1)
    gateway.produce_errors.append(ErrorCode.INVALID_RECORD)
    outcomes: list[tuple[object, object]] = []
    with producer(fake.address) as p:
        p.send("t", b"v", callback=lambda m, e: outcomes.append((m, e)))
        p.flush()
    assert outcomes[0][0] is None and isinstance(outcomes[0][1], RiverlogError)


def test_a_raising_callback_does_not_stop_the_sender(
    fake: FakeServer, gateway: FakeGateway
) -> None:
    gateway.create("t", 1)

    def boom(metadata: object, error: object) -> None:
        raise RuntimeError("user bug")

    with producer(fake.address) as p:
        p.send("t", b"v", callback=boom)
        assert p.send("t", b"w").result(10).offset == 1
