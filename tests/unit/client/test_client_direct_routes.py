"""The producer's direct routing (decision 0047) against plain sockets on 127.0.0.1, no gateway:
a node granted already but not connected yet. The connect never blocks `route` (the sender
calls it inside the accumulator's drain, under its lock): a connect that stays in progress (a
listener whose backlog is full drops the SYN) leaves the partition waiting (WAIT) with the lock
free; a refused or timed-out connect sends the node's partitions through the gateway. Metadata
older than metadata.max.age.ms keeps the known leader while it is refreshed; metadata an error
invalidated goes through the gateway."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from riverlog.client._grants import DataGrant
from riverlog.client._grants import _Node as _Granted
from riverlog.client._metadata import INVALIDATED, TopicInfo
from riverlog.client.config import ProducerConfig
from riverlog.client.producer.accumulator import RecordAccumulator
from riverlog.client.producer.direct import GATEWAY, WAIT, DirectRoutes, RoutingFilter, _Node
from riverlog.client.producer.direct_io import Wakeup

pytestmark = pytest.mark.timeout(30)

NODE = 1


class Metadata:
    """MetadataCache's surface that DirectRoutes uses: `topics` and `refresh_async`."""

    def __init__(self, expires_at: float) -> None:
        self.topics = {"t": TopicInfo(1, (0,), expires_at, (NODE,))}
        self.refreshes: list[list[str]] = []

    def refresh_async(self, topics: list[str], done: Callable[[], None]) -> None:
        self.refreshes.append(topics)


def routes_to(port: int, wakeup: Wakeup, metadata: Metadata | None = None) -> DirectRoutes:
    config = ProducerConfig.from_kafka({"bootstrap.servers": "127.0.0.1:9092"})
    meta: Any = metadata or Metadata(time.monotonic() + 3600)
    routes = DirectRoutes(config, None, meta, wakeup, lambda *_: None)  # type: ignore[arg-type]
    inf = float("inf")
    grant = DataGrant(NODE, frozenset({"t"}), b"g", 1 << 30, "127.0.0.1", port, 0.0, inf, inf, 1)
    routes.keeper._nodes[NODE] = _Granted(current=grant)  # granted already
    routes._nodes[NODE] = _Node(NODE)
    routes._nodes[NODE].host, routes._nodes[NODE].port = "127.0.0.1", port
    return routes


@pytest.fixture
def wakeup() -> Iterator[Wakeup]:
    w = Wakeup()
    yield w
    w.close()


@pytest.fixture
def full_listener() -> Iterator[int]:
    """The port of a listener whose accept queue is full: a new connect stays in progress."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    address = listener.getsockname()
    fillers: list[socket.socket] = []
    try:
        for _ in range(16):
            s = socket.socket()
            s.setblocking(False)
            fillers.append(s)
            s.connect_ex(address)
            if not select.select([], [s], [], 0.5)[1]:
                break  # this one stayed in progress: the queue is full
        else:
            pytest.skip("could not fill the listener's accept queue")
        yield address[1]
    finally:
        for s in fillers:
            s.close()
        listener.close()


def test_a_connect_in_progress_waits_without_holding_the_drain(
    wakeup: Wakeup, full_listener: int
) -> None:
    routes = routes_to(full_listener, wakeup)
    acc = RecordAccumulator(
        batch_size=1024,
        linger_ms=0,
        buffer_memory=1 << 20,
        max_block_ms=1000,
        delivery_timeout_ms=60000,
    )
    acc.append("t", 0, 0, None, b"v")
    filt = RoutingFilter(set(), routes, {}, {}, 5, time.monotonic())
    batches, _ = acc.drain(time.monotonic(), 1 << 20, filt)  # route() runs under acc._lock
    conn = routes._nodes[NODE].conn
    assert conn is not None and conn.connecting  # returned while the connect is pending
    assert batches == [] and filt.routes[("t", 0)] == WAIT
    free: list[bool] = []
    other = threading.Thread(target=lambda: free.append(acc._lock.acquire(blocking=False)))
    other.start()
    other.join()
    assert free == [True]  # a send() could append now
    acc._lock.release()
    # still pending after a turn of the sender's selector: WAIT, never the gateway yet
    wakeup.wait(0)
    assert routes.route("t", 0, time.monotonic()) == WAIT
    # past the connect timeout: given up, the gateway (as after a refused connect)
    routes.poll(time.monotonic() + 3600)
    assert routes._nodes[NODE].conn is None
    assert routes.route("t", 0, time.monotonic()) == GATEWAY


def test_a_refused_connect_falls_back_to_the_gateway(wakeup: Wakeup) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    routes = routes_to(port, wakeup)
    for _ in range(200):  # refused at once, or once the selector sees it
        if routes.route("t", 0, time.monotonic()) == GATEWAY:
            break
        wakeup.wait(0.05)
    assert routes.route("t", 0, time.monotonic()) == GATEWAY
    assert routes._nodes[NODE].conn is None


def test_aged_metadata_keeps_the_leader_while_it_is_refreshed(wakeup: Wakeup) -> None:
    metadata = Metadata(time.monotonic() - 1)  # older than metadata.max.age.ms
    routes = routes_to(1, wakeup, metadata)
    node = routes._nodes[NODE]
    node.conn, node.confirmed, node.serial = object(), True, 1  # type: ignore[assignment]
    assert routes.route("t", 0, time.monotonic()) == NODE
    assert metadata.refreshes == [["t"]]
    metadata.topics["t"] = metadata.topics["t"]._replace(expires_at=INVALIDATED)
    routes._refreshed_at.clear()
    routes._refreshing.clear()
    assert routes.route("t", 0, time.monotonic()) == GATEWAY  # a leadership error said so
    assert metadata.refreshes == [["t"], ["t"]]
    node.conn = None


def test_a_producer_failing_in_init_closes_its_wakeup(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Wakeup (a socket pair and an epoll fd) is made before the sender; a failure after
    it must not leak them. (Its own descriptors, not a count of the process's: other tests'
    leftovers close at any time.)"""
    from riverlog.client import Producer
    from riverlog.client.producer import producer as producer_module

    made: list[Wakeup] = []

    class Recorded(Wakeup):
        def __init__(self) -> None:
            super().__init__()
            made.append(self)

    def refuse(*args: object, **kwargs: object) -> None:
        raise RuntimeError("refused")

    monkeypatch.setattr(producer_module, "Wakeup", Recorded)
    monkeypatch.setattr(producer_module, "RecordAccumulator", refuse)
    with pytest.raises(RuntimeError, match="refused"):
        Producer({"bootstrap.servers": "127.0.0.1:9", "direct.access": True})
    assert len(made) == 1
    w = made[0]
    assert w._reader.fileno() == w._writer.fileno() == -1
    with pytest.raises((ValueError, OSError)):
        w._selector.select(0)  # closed: epoll fd gone


def test_a_grant_paying_for_few_largest_frames_leaves_the_node_on_the_gateway(
    wakeup: Wakeup,
) -> None:
    # A quota caps a grant at one sample's worth; the producer keeps one largest frame in
    # reserve and renews with two left: a grant of two frames would be used about half.
    from concurrent.futures import Future

    from riverlog.v1 import gateway_pb2

    config = ProducerConfig.from_kafka({"bootstrap.servers": "127.0.0.1:9092"})
    meta: Any = Metadata(time.monotonic() + 3600)
    routes = DirectRoutes(config, None, meta, wakeup, lambda *_: None)  # type: ignore[arg-type]
    keeper = routes.keeper
    asked: list[Future[gateway_pb2.GrantDataAccessResponse]] = []

    def ask(node: int, topics: frozenset[str]) -> Future[gateway_pb2.GrantDataAccessResponse]:
        asked.append(Future())
        return asked[-1]

    keeper._ask_fn = ask
    cost = routes._max_cost
    for node, budget, direct in ((1, 3 * cost, False), (2, 4 * cost, True)):
        assert keeper.lookup(node, ["t"]) is not None  # PENDING
        answer = gateway_pb2.GrantDataAccessResponse(
            grant=b"g", byte_budget=budget, lifetime_ms=60_000, host="h", direct_port=9
        )
        asked[-1].set_result(answer)
        keeper.collect()
        assert isinstance(keeper.lookup(node, ["t"]), DataGrant) is direct
    routes.close()
