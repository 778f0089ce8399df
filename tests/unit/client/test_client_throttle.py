"""The SDK's side of quota throttling: per-gateway pauses and Kafka's throttle-time metrics."""

from __future__ import annotations

import time

import pytest
from client_fakes import FakeGateway, FakeServer

from riverlog.client import ConfigError, Consumer, Producer
from riverlog.client._connection import GatewayConnection
from riverlog.client._credentials import Credentials
from riverlog.client._throttle import ThrottleTracker
from riverlog.client.config import ProducerConfig
from riverlog.common.types import TopicPartition


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_throttled_gateway_is_left_alone_until_the_time_passed() -> None:
    clock = Clock()
    tracker = ThrottleTracker(clock=clock)
    tracker.record(0, 250)
    tracker.record(1, 0)
    assert tracker.remaining_s(0) == 0.25 and tracker.remaining_s(1) == 0.0
    tracker.record(0, 100)  # a shorter one never cuts a pause short
    assert tracker.remaining_s(0) == 0.25
    clock.now += 0.25
    assert tracker.remaining_s(0) == 0.0


def test_metrics_are_kafkas_avg_and_max_over_the_sample_window() -> None:
    clock = Clock()
    tracker = ThrottleTracker(sample_window_s=60, clock=clock)
    assert tracker.metrics("produce") == {
        "produce-throttle-time-avg": 0.0,
        "produce-throttle-time-max": 0.0,
    }
    for ms in (0, 0, 300, 100):
        tracker.record(0, ms)
    assert tracker.metrics("fetch") == {
        "fetch-throttle-time-avg": 100.0,
        "fetch-throttle-time-max": 300.0,
    }
    clock.now += 61
    assert tracker.metrics("produce")["produce-throttle-time-max"] == 0.0


def test_credentials_travel_as_call_metadata() -> None:
    config = ProducerConfig.from_kafka(
        {"bootstrap.servers": "h:1", "sasl.username": "alice", "sasl.password": "pw"}
    )
    assert config.credentials == Credentials("alice", "pw")
    conn = GatewayConnection(config.bootstrap_servers, "app", config.credentials)
    assert conn.metadata == (
        ("riverlog-client-id", "app"),
        ("riverlog-user", "alice"),
        ("riverlog-password", "pw"),
    )
    anonymous = ProducerConfig.from_kafka({"bootstrap.servers": "h:1"})
    assert anonymous.credentials is None
    assert GatewayConnection(("h:1",), "app", None).metadata == (("riverlog-client-id", "app"),)
    conn.throttle.record(0, 500)
    assert conn.throttle_remaining_s() > 0.4


class ThrottlingGateway(FakeGateway):
    """Answers every produce with a throttle time and notes when each request arrived."""

    def __init__(self, throttle_ms: int) -> None:
        super().__init__()
        self.throttle_ms = throttle_ms
        self.arrivals: list[float] = []

    def Produce(self, request, context):
        self.arrivals.append(time.monotonic())
        response = super().Produce(request, context)
        response.throttle_time_ms = self.throttle_ms
        return response


def test_the_producer_sends_nothing_until_the_throttle_time_passed() -> None:
    gateway = ThrottlingGateway(300)
    gateway.create("t")
    server = FakeServer(gateway)
    try:
        conf = {
            "bootstrap.servers": server.address,
            "linger.ms": 0,
            "enable.idempotence": False,
            "max.in.flight.requests.per.connection": 1,
        }
        with Producer(conf) as producer:
            producer.send("t", b"a").result(timeout=10)
            producer.send("t", b"b").result(timeout=10)
            metrics = producer.metrics()
    finally:
        server.stop()
    first, second = gateway.arrivals[:2]
    assert second - first >= 0.29  # the second request waited out the first's throttle time
    assert metrics["produce-throttle-time-max"] == 300.0


class ThrottlingFetchGateway(FakeGateway):
    """Answers every fetch with a throttle time and notes when each fetch arrived."""

    def __init__(self, throttle_ms: int) -> None:
        super().__init__()
        self.throttle_ms = throttle_ms
        self.fetches: list[float] = []

    def Fetch(self, request, context):
        self.fetches.append(time.monotonic())
        response = super().Fetch(request, context)
        response.throttle_time_ms = self.throttle_ms
        return response


def test_the_consumer_fetches_nothing_until_the_throttle_time_passed() -> None:
    gateway = ThrottlingFetchGateway(400)
    gateway.create("t")
    server = FakeServer(gateway)
    try:
        consumer = Consumer({"bootstrap.servers": server.address, "fetch.max.wait.ms": 10})
        consumer.assign([TopicPartition("t", 0)])
        consumer.seek(TopicPartition("t", 0), 0)
        deadline = time.monotonic() + 5
        while len(gateway.fetches) < 2 and time.monotonic() < deadline:
            consumer.poll(timeout_ms=100)
        metrics = consumer.metrics()
        consumer.close()
    finally:
        server.stop()
    assert len(gateway.fetches) >= 2
    assert gateway.fetches[1] - gateway.fetches[0] >= 0.39
    assert metrics["fetch-throttle-time-max"] == 400.0


def test_a_token_travels_as_bearer_and_ssl_is_a_protocol() -> None:
    config = ProducerConfig.from_kafka(
        {"bootstrap.servers": "h:1", "sasl.oauthbearer.token": "alice.s3cret"}
    )
    conn = GatewayConnection(config.bootstrap_servers, "app", config.credentials)
    assert conn.metadata == (
        ("riverlog-client-id", "app"),
        ("authorization", "Bearer alice.s3cret"),
    )
    tls = ProducerConfig.from_kafka({"bootstrap.servers": "h:1", "security.protocol": "SSL"})
    assert tls.credentials == Credentials(tls=True)
    assert tls.credentials is not None and tls.credentials.channel_credentials() is not None
    with pytest.raises(ConfigError):
        ProducerConfig.from_kafka({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL"})
