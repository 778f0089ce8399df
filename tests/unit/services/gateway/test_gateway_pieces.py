"""The gateway's small parts: settings, deadlines, input checks, GetMetadata from the cache, the
waits after admin calls, and the stream pipeline (bounded, out of order, failures)."""

import asyncio

import pytest
from gateway_fakes import FAST, Harness, make_image

from riverlog.common.clock import ManualClock
from riverlog.common.cluster import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.gateway.admin import Admin
from riverlog.services.gateway.config import GatewayConfig
from riverlog.services.gateway.context import Deadline
from riverlog.services.gateway.peers.metadata import MetadataPeer
from riverlog.services.gateway.streams import Pipeline
from riverlog.services.gateway.validation import item_errors, topic_error


def test_config_overrides_by_kafka_name() -> None:
    config = GatewayConfig.from_overrides({"request.timeout.ms": "1500", "max.block.ms": "10"})
    assert (config.request_timeout_ms, config.max_block_ms) == (1500, 10)
    assert config.request_timeout_s == 1.5
    for bad in ({"no.such.key": "1"}, {"retry.backoff.ms": "soon"}, {"retry.backoff.ms": "-1"}):
        with pytest.raises(RiverlogError) as info:
            GatewayConfig.from_overrides(bad)
        assert info.value.code == ErrorCode.INVALID_CONFIG
    with pytest.raises(RiverlogError):
        GatewayConfig.from_overrides({"retry.backoff.ms": "500", "retry.backoff.max.ms": "100"})


def test_deadline_leaves_a_margin_inside_the_clients() -> None:
    clock = ManualClock()
    assert Deadline.for_call(30, None, clock).remaining() == 30
    assert Deadline.for_call(30, 2.0, clock).remaining() == pytest.approx(1.95)
    assert Deadline.for_call(30, 0.4, clock).remaining() == pytest.approx(0.38)  # 5 % margin
    assert Deadline.for_call(30, -1, clock).expired
    assert Deadline.after(10, clock).earlier(1).remaining() == 1


@pytest.mark.parametrize("start_ms", [12_345, 27_096_314, 1_700_000_000_000])
@pytest.mark.parametrize("budget_s", [0.0005, 0.001, 0.005, 0.3, 1.7])
def test_a_deadline_not_expired_has_a_whole_millisecond_left(
    start_ms: int, budget_s: float
) -> None:
    # The clock ticks in milliseconds. A caller that waits `remaining()` and tries again
    # must find the deadline expired after that wait; a sliver of a millisecond left (a float
    # deadline a hair past a tick) made such a loop try again at once until the next tick.
    clock = ManualClock(start_ms)
    deadline = Deadline.after(budget_s, clock)
    while not deadline.expired:
        left = deadline.remaining()
        assert left >= 0.001
        clock.advance(round(left * 1000))
        assert deadline.expired
    assert deadline.remaining() == 0
    assert clock.monotonic_ms() - start_ms == max(1, round(budget_s * 1000))


def test_deadline_follows_its_clock() -> None:
    clock = ManualClock()
    deadline = Deadline.after(2, clock)
    clock.advance(1500)
    assert deadline.remaining() == pytest.approx(0.5) and not deadline.expired
    assert deadline.earlier(10).remaining() == pytest.approx(0.5)
    assert deadline.earlier(0.1).clock is clock
    clock.advance(500)
    assert deadline.expired and deadline.remaining() == 0


@pytest.mark.parametrize("name", ["", ".", "..", "a b", "t/x", "é", "x" * 250, "\x00", "topic!"])
def test_bad_topic_names(name: str) -> None:
    error = topic_error(name)
    assert error is not None and error.code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert error.message


@pytest.mark.parametrize("name", ["t", "a.b-c_d", "x" * 249, "__consumer_offsets"])
def test_good_topic_names(name: str) -> None:
    assert topic_error(name) is None


def test_item_errors_cover_names_partitions_and_repeats() -> None:
    tps = [
        TopicPartition("t", 0),
        TopicPartition("t", -2),
        TopicPartition("t", 0),
        TopicPartition("", 1),
    ]
    errors = item_errors(tps)
    assert {i: e.code for i, e in errors.items()} == {
        1: ErrorCode.INVALID_REQUEST,
        2: ErrorCode.INVALID_REQUEST,
        3: ErrorCode.INVALID_TOPIC_EXCEPTION,
    }


def test_get_metadata_from_the_cache() -> None:
    gateway = NodeInfo("gateway", 7, "127.0.0.1", 7000)
    meta = NodeInfo("metadata", 1, "127.0.0.1", 7001)
    h = Harness(
        make_image(
            4,
            {"a": [1], "b": [2, 3], "__consumer_offsets": [1]},
            internal=frozenset({"__consumer_offsets"}),
            extra_nodes=(gateway, meta),
        ),
        FAST,
    )
    admin = Admin(h.cache, FAST)
    view = admin.metadata([], include_internal=False)
    assert [t.name for t in view.topics] == ["a", "b"]
    assert [(n.kind, n.node_id) for n in view.nodes] == [
        ("gateway", 7),
        ("storage", 1),
        ("storage", 2),
        ("storage", 3),
    ]
    assert (view.version, view.cluster_id) == (4, "test-cluster")
    with_internal = admin.metadata([], include_internal=True)
    assert "__consumer_offsets" in [t.name for t in with_internal.topics]
    named = admin.metadata(
        ["b", "zz", "b", "bad name", "__consumer_offsets"], include_internal=False
    )
    assert [t.name for t in named.topics] == ["b", "__consumer_offsets"]
    assert [(e.name, e.error_code) for e in named.errors] == [
        ("zz", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("bad name", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ]


async def test_admin_waits_for_its_effect_on_the_cache() -> None:
    h = Harness(make_image(1, {"a": [1]}), FAST)
    admin = Admin(h.cache, GatewayConfig(max_block_ms=2000))

    async def later() -> None:
        await asyncio.sleep(0.02)
        await h.source.publish(make_image(2, {"a": [1], "new": [-1, 2]}))
        await asyncio.sleep(0.02)
        await h.source.publish(make_image(3, {"a": [1], "new": [1, 2, 3]}))

    pusher = asyncio.create_task(later())
    assert await admin.await_created({"new": ""}, Deadline.after(5))
    assert h.cache.version == 3  # not before every partition had a leader
    assert await admin.await_partitions({"new": 3}, Deadline.after(5))
    await pusher
    ids = admin.topic_ids(["a", "nope"])
    assert list(ids) == ["a"]
    # Nothing deleted it yet: a deadline already reached answers False at once, no wait.
    assert not await admin.await_deleted(ids, Deadline.after(0, ManualClock()))
    await h.source.publish(make_image(4, {"new": [1]}))
    assert await admin.await_deleted(ids, Deadline.after(1))


async def _requests(items, gap: float = 0.0):
    for item in items:
        if gap:
            await asyncio.sleep(gap)
        yield item


async def test_pipeline_is_bounded_and_answers_out_of_order() -> None:
    running = 0
    peak = 0
    release = {i: asyncio.Event() for i in range(10)}

    async def handle(i: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.wait_for(release[i].wait(), 5)
        running -= 1
        return i

    async def releaser() -> None:
        for i in reversed(range(10)):
            await asyncio.sleep(0.01)
            release[i].set()

    task = asyncio.create_task(releaser())
    out = [r async for r in Pipeline(handle, 4).run(_requests(range(10)))]
    await task
    assert sorted(out) == list(range(10))
    assert peak <= 4
    assert out != list(range(10))  # later requests finished first


async def test_pipeline_failure_ends_the_stream_and_cancels_the_rest() -> None:
    cancelled = asyncio.Event()

    async def handle(i: int) -> int:
        if i == 1:
            raise RiverlogError("boom", ErrorCode.INVALID_REQUEST)
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return i

    with pytest.raises(RiverlogError):
        async for _ in Pipeline(handle, 8).run(_requests([0, 1, 2])):
            pass
    assert cancelled.is_set()


async def test_pipeline_keeps_start_order() -> None:
    started: list[int] = []

    async def handle(i: int) -> int:
        started.append(i)
        await asyncio.sleep(0)
        return i

    out = [r async for r in Pipeline(handle, 3).run(_requests(range(20)))]
    assert started == list(range(20))
    assert sorted(out) == list(range(20))


class _FlakyMetadata:
    def __init__(self, failures: int, code: ErrorCode = ErrorCode.NETWORK_EXCEPTION) -> None:
        self.failures = failures
        self.code = code
        self.calls = 0

    async def call(self, method, request, timeout_s=None):
        self.calls += 1
        if self.calls <= self.failures:
            raise RiverlogError("connection refused", self.code)
        return ("answer", method, request)


async def test_admin_passthrough_waits_out_an_unreachable_metadata_service() -> None:
    flaky = _FlakyMetadata(failures=3)
    peer = MetadataPeer(flaky, FAST)
    assert await peer.call("CreateTopics", "req", Deadline.after(5)) == (
        "answer",
        "CreateTopics",
        "req",
    )
    assert flaky.calls == 4
    refused = MetadataPeer(_FlakyMetadata(failures=1, code=ErrorCode.INVALID_CONFIG), FAST)
    with pytest.raises(RiverlogError) as info:
        await refused.call("AlterConfigs", "req", Deadline.after(5))
    assert info.value.code == ErrorCode.INVALID_CONFIG
    down = MetadataPeer(_FlakyMetadata(failures=10**6), FAST)
    with pytest.raises(RiverlogError) as info:
        await down.call("ListTopics", "req", Deadline.after(0.2))
    assert info.value.code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT)
    with pytest.raises(RiverlogError):
        await peer.call("Produce", "req", Deadline.after(1))
