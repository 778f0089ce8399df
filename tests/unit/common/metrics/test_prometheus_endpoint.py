"""The `/metrics` endpoint over real HTTP on loopback: a collector reading state on an event
loop running in another thread, unary RPC methods timed by `instrument`, streams and
self-timed methods left alone, and errors counted by Kafka error name."""

from __future__ import annotations

import asyncio
import socket
import threading
import urllib.request
from collections.abc import AsyncIterator, Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.metrics import endpoint
from riverlog.common.metrics.endpoint import LoopCollector, family
from riverlog.common.metrics.rpc import RequestTimer, instrument
from riverlog.common.metrics.settings import PrometheusSettings


@pytest.fixture
def served() -> Iterator[str]:
    endpoint.configure(PrometheusSettings(port=0))
    address = endpoint.start("127.0.0.1")
    assert address is not None
    try:
        yield f"http://{address}/metrics"
    finally:
        endpoint.stop()
        endpoint.unregister("test")
        endpoint.configure(None)


@pytest.fixture
def loop() -> Iterator[tuple[asyncio.AbstractEventLoop, threading.Thread]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield loop, thread
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


def test_loop_collector_reads_on_the_loop(
    served: str, loop: tuple[asyncio.AbstractEventLoop, threading.Thread]
) -> None:
    event_loop, loop_thread = loop
    threads: list[int] = []

    def snapshot() -> list[object]:
        threads.append(threading.get_ident())
        groups = family("riverlog_consumer_groups")
        groups.add_metric(["Stable"], 2)
        return [groups]

    collector = LoopCollector(event_loop, ["riverlog_consumer_groups"], snapshot)
    endpoint.register("test", collector)
    endpoint.register("test", collector)  # again under the same key: replaced, no error
    samples = scrape(served)
    assert samples[("riverlog_consumer_groups", (("state", "Stable"),))] == 2
    assert threads and set(threads) == {loop_thread.ident}


class Servicer:
    METRICS_TIMED_INSIDE = frozenset({"Fetch"})

    async def Describe(self, request: int, context: object) -> int:
        if request < 0:
            raise RiverlogError("no such topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return request + 1

    async def Fetch(self, request: int, context: object) -> int:
        return request

    async def Watch(self, request: int, context: object) -> AsyncIterator[int]:
        yield request

    def helper(self) -> str:
        return "kept"


def test_instrument_times_unary_methods_only(served: str) -> None:
    proxy = instrument(Servicer(), "riverlog.v1.TestService")
    assert asyncio.run(proxy.Describe(1, None)) == 2
    with pytest.raises(RiverlogError):
        asyncio.run(proxy.Describe(-1, None))
    assert proxy.helper() == "kept"
    assert proxy.Fetch.__func__ is Servicer.Fetch  # timed by the servicer itself
    assert proxy.Watch.__func__ is Servicer.Watch  # a stream: left alone
    timer = RequestTimer("riverlog.v1.TestService", "Fetch")
    timer.done(timer.start())
    samples = scrape(served)
    count = "riverlog_request_duration_seconds_count"
    assert samples[(count, (("api", "Describe"), ("service", "TestService")))] == 2
    assert samples[(count, (("api", "Fetch"), ("service", "TestService")))] == 1
    errors = "riverlog_request_errors_total"
    key = (("api", "Describe"), ("error", "UNKNOWN_TOPIC_OR_PARTITION"), ("service", "TestService"))
    assert samples[(errors, key)] == 1


def test_nothing_is_instrumented_without_an_endpoint() -> None:
    endpoint.configure(None)
    servicer = Servicer()
    assert instrument(servicer, "riverlog.v1.TestService") is servicer
    assert endpoint.start("127.0.0.1") is None


def test_a_port_in_use_is_a_clear_config_error(served: str) -> None:
    endpoint.stop()  # the fixture's endpoint; the fixture still resets the settings
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        endpoint.configure(PrometheusSettings(port=taken.getsockname()[1]))
        with pytest.raises(RiverlogError) as info:
            endpoint.start("127.0.0.1")
    assert info.value.code == ErrorCode.INVALID_CONFIG
    assert "metrics.prometheus.port" in str(info.value)
