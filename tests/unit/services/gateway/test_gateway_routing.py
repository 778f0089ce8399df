"""Routing: leader lookup from the pushed image, grouping by leader, and the retry of stale
routes (only the stale partitions, only after newer metadata or a backoff, bounded by the
request deadline)."""

import asyncio

import pytest
from gateway_fakes import FAST, Harness, make_image

from riverlog.common.clock import ManualClock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import TopicPartition
from riverlog.services.gateway.config import GatewayConfig
from riverlog.services.gateway.produce import ProducePart, ProducePartResult

BATCH = b"batch-bytes"  # the router never looks inside items


def parts(*tps: tuple[str, int]) -> list[ProducePart]:
    return [ProducePart(TopicPartition(t, p), BATCH) for t, p in tps]


def test_route_follows_the_image(harness: Harness) -> None:
    route = harness.cache.route(TopicPartition("t", 1))
    assert route.node.node_id == 2
    assert route.node.address == "127.0.0.1:9002"
    assert route.version == 1


@pytest.mark.parametrize(
    ("tp", "code"),
    [
        (TopicPartition("missing", 0), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TopicPartition("t", 3), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    ],
)
def test_route_errors(harness: Harness, tp: TopicPartition, code: ErrorCode) -> None:
    with pytest.raises(RiverlogError) as info:
        harness.cache.route(tp)
    assert info.value.code == code


def test_no_leader_or_dead_leader_is_leader_not_available() -> None:
    h = Harness(make_image(1, {"t": [-1, 7]}), FAST)
    for p in (0, 1):
        with pytest.raises(RiverlogError) as info:
            h.cache.route(TopicPartition("t", p))
        assert info.value.code == ErrorCode.LEADER_NOT_AVAILABLE


def test_group_by_leader_keeps_request_order(harness: Harness) -> None:
    items = parts(("t", 0), ("t", 1), ("u", 0), ("t", 2), ("x", 0))
    groups, errors = harness.router.group(items, range(len(items)))
    assert [(g.node.node_id, g.indexes) for g in groups] == [(1, [0, 3]), (2, [1]), (3, [2])]
    assert set(errors) == {4}


async def test_dispatch_calls_leaders_in_parallel_and_merges_in_order(harness: Harness) -> None:
    harness.storage.gate = asyncio.Event()
    items = parts(("t", 0), ("t", 1), ("u", 0), ("t", 2))
    task = asyncio.create_task(
        harness.router.dispatch(
            items, harness.send, ProducePartResult.failed, harness.ctx().deadline
        )
    )
    for _ in range(100):
        if harness.storage.in_flight == 3:
            break
        await asyncio.sleep(0.01)
    assert harness.storage.in_flight == 3  # all three leaders asked before any answered
    harness.storage.gate.set()
    results = await task
    assert [r.tp for r in results] == [i.tp for i in items]
    assert [r.base_offset for r in results] == [100, 200, 300, 100]
    assert sorted(harness.storage.nodes_called("produce")) == [1, 2, 3]


async def test_stale_partition_is_retried_alone_after_newer_metadata(harness: Harness) -> None:
    moved = make_image(2, {"t": [3, 2, 1], "u": [3]})

    def answer(node_id: int, item: ProducePart):
        if item.tp == TopicPartition("t", 0) and node_id == 1:
            asyncio.get_running_loop().call_soon(
                lambda: asyncio.ensure_future(harness.source.publish(moved))
            )
            return ProducePartResult(item.tp, ErrorCode.NOT_LEADER_OR_FOLLOWER, "not leader")
        return None

    harness.storage.answer = answer
    items = parts(("t", 0), ("t", 1), ("t", 2))
    results = await harness.router.dispatch(
        items, harness.send, ProducePartResult.failed, harness.ctx().deadline
    )
    assert [r.error_code for r in results] == [0, 0, 0]
    assert results[0].base_offset == 300  # answered by the new leader, node 3
    sent = [(node, [i.tp.partition for i in batch]) for _, node, batch, _ in harness.storage.calls]
    assert sorted(sent[:2]) == [(1, [0, 2]), (2, [1])]
    assert sent[2:] == [(3, [0])]  # only the stale partition went again


async def test_unreachable_leader_is_retried_after_the_route_moves(harness: Harness) -> None:
    def answer(node_id: int, item: ProducePart):
        if node_id == 1:
            return RiverlogError("connection refused", ErrorCode.NETWORK_EXCEPTION)
        return None

    harness.storage.answer = answer

    async def move_later() -> None:
        await asyncio.sleep(0.05)
        await harness.source.publish(make_image(2, {"t": [2, 2, 2], "u": [3]}))

    mover = asyncio.create_task(move_later())
    results = await harness.router.dispatch(
        parts(("t", 0), ("t", 2)),
        harness.send,
        ProducePartResult.failed,
        harness.ctx().deadline,
    )
    await mover
    assert [(r.error_code, r.base_offset) for r in results] == [(0, 200), (0, 200)]


async def test_gives_up_with_the_last_error_at_the_deadline(harness: Harness) -> None:
    harness.storage.answer = lambda node_id, item: ProducePartResult(
        item.tp, ErrorCode.NOT_LEADER_OR_FOLLOWER, f"node {node_id} is not the leader"
    )
    results = await harness.router.dispatch(
        parts(("t", 0)),
        harness.send,
        ProducePartResult.failed,
        harness.ctx(0.3).deadline,
    )
    assert results[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert results[0].error_message == "node 1 is not the leader"
    # Backoff bounds the number of attempts: 0.3 s with 10 ms doubling to 50 ms.
    assert 2 <= len(harness.storage.calls) <= 15


async def test_metadata_that_leaves_the_route_as_it_was_does_not_cut_the_backoff(
    harness: Harness,
) -> None:
    # Each refusal is followed by a new image that changes nothing for t-0 (as another topic's
    # creation or an ISR change would): only a moved route may skip the backoff.
    images = iter(range(2, 10_000))

    def answer(node_id: int, item: ProducePart) -> ProducePartResult:
        unrelated = make_image(next(images), {"t": [1, 2, 1], "u": [3], "v": [2]})
        asyncio.get_running_loop().call_soon(
            lambda: asyncio.ensure_future(harness.source.publish(unrelated))
        )
        return ProducePartResult(item.tp, ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader")

    harness.storage.answer = answer
    results = await harness.router.dispatch(
        parts(("t", 0)), harness.send, ProducePartResult.failed, harness.ctx(0.3).deadline
    )
    assert results[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # As in the test above: 0.3 s with 10 ms doubling to 50 ms.
    assert 2 <= len(harness.storage.calls) <= 15


async def test_gives_up_once_a_wait_took_the_rest_of_the_deadline() -> None:
    # The deadline's clock ticks in milliseconds: within the last one, the deadline is not
    # expired though less than a millisecond remains. A wait for that remainder is the
    # request's last; calling the leader again after it would repeat at once until the tick.
    clock = ManualClock()
    h = Harness(make_image(1, {"t": [1]}), FAST, clock)

    def answer(node_id: int, item: ProducePart) -> ProducePartResult:
        if len(h.storage.calls) == 20:
            clock.advance(1)  # so that the test ends when the router does not stop by itself
        return ProducePartResult(item.tp, ErrorCode.NOT_LEADER_OR_FOLLOWER, "not the leader")

    h.storage.answer = answer
    results = await h.router.dispatch(
        parts(("t", 0)), h.send, ProducePartResult.failed, h.ctx(0.0005).deadline
    )
    assert results[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert len(h.storage.calls) == 1


async def test_unknown_topic_answers_at_once_without_sending(harness: Harness) -> None:
    results = await harness.router.dispatch(
        parts(("nope", 0), ("t", 9)),
        harness.send,
        ProducePartResult.failed,
        harness.ctx().deadline,
    )
    assert [r.error_code for r in results] == [ErrorCode.UNKNOWN_TOPIC_OR_PARTITION] * 2
    assert harness.storage.calls == []


async def test_no_leader_waits_for_an_election_then_sends() -> None:
    h = Harness(make_image(1, {"t": [-1]}), FAST)

    async def elect() -> None:
        await asyncio.sleep(0.05)
        await h.source.publish(make_image(2, {"t": [2]}))

    elector = asyncio.create_task(elect())
    results = await h.router.dispatch(
        parts(("t", 0)), h.send, ProducePartResult.failed, h.ctx().deadline
    )
    await elector
    assert (results[0].error_code, results[0].base_offset) == (0, 200)


async def test_no_leader_gives_up_after_max_block() -> None:
    config = GatewayConfig(
        request_timeout_ms=5_000, retry_backoff_ms=10, max_block_ms=100, retry_backoff_max_ms=20
    )
    h = Harness(make_image(1, {"t": [-1]}), config)
    results = await h.router.dispatch(
        parts(("t", 0)), h.send, ProducePartResult.failed, h.ctx(5).deadline
    )
    assert results[0].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    assert h.storage.calls == []


async def test_non_retriable_errors_are_returned_as_they_are(harness: Harness) -> None:
    harness.storage.answer = lambda node_id, item: ProducePartResult(
        item.tp, ErrorCode.CORRUPT_MESSAGE, "bad crc"
    )
    results = await harness.router.dispatch(
        parts(("t", 0)), harness.send, ProducePartResult.failed, harness.ctx().deadline
    )
    assert (results[0].error_code, results[0].error_message) == (
        ErrorCode.CORRUPT_MESSAGE,
        "bad crc",
    )
    assert len(harness.storage.calls) == 1


async def test_wait_newer_returns_on_push_and_times_out_without(harness: Harness) -> None:
    assert not await harness.cache.wait_newer(1, 0.05)
    pusher = asyncio.create_task(harness.source.publish(make_image(5, {"t": [1]})))
    assert await harness.cache.wait_newer(1, 2.0)
    await pusher
    assert harness.cache.version == 5


def test_available_partitions_prefer_live_leaders() -> None:
    h = Harness(make_image(1, {"t": [1, -1, 9, 2]}), FAST)
    assert h.cache.available_partitions("t") == (0, 3)
    h2 = Harness(make_image(1, {"t": [-1, -1]}), FAST)
    assert h2.cache.available_partitions("t") == (0, 1)
