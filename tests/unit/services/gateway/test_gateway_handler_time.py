"""HandlerTime on a fake clock that only the test moves: a request is charged the steps its
coroutines run, never the time it spends awaiting others (a peer's answer, a sleep), and the
steps of its sub-tasks add up."""

from __future__ import annotations

import asyncio

import pytest

from riverlog.services.gateway.context import (
    Deadline,
    HandlerTime,
    RequestContext,
    bind,
    current_request,
    measured,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now

    def work(self, ns: int) -> None:
        """A step running for `ns` (no await inside)."""
        self.now += ns


def _peer(clock: FakeClock, wait_ns: int, answer: int) -> asyncio.Future[int]:
    """Stands for a remote call: answered from outside the request's steps (as gRPC answers
    a call from its completion queue), `wait_ns` later."""
    future: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def answered() -> None:
        clock.now += wait_ns
        future.set_result(answer)

    asyncio.get_running_loop().call_soon(answered)
    return future


def test_the_waits_between_steps_are_not_charged() -> None:
    clock = FakeClock()
    meter = HandlerTime(clock)

    async def handler() -> int:
        clock.work(5)
        answer = await _peer(clock, 1_000, 7)  # 1000 ns pass while the handler is suspended
        clock.work(3)
        return answer

    async def main() -> int:
        return await meter.run(handler())

    assert asyncio.run(main()) == 7
    assert clock.now == 1_008
    assert meter.busy_ns == 8


def test_sub_tasks_add_their_steps() -> None:
    clock = FakeClock()
    ctx = RequestContext("Produce", Deadline.after(5), work=HandlerTime(clock))

    async def to_node(ns: int) -> int:
        clock.work(ns)
        await _peer(clock, 10_000, 0)
        clock.work(ns)
        return ns

    async def handler() -> list[int]:
        clock.work(1)
        return await asyncio.gather(*(measured(to_node(n)) for n in (2, 3, 4)))

    async def main() -> list[int]:
        bind(ctx)
        return await ctx.work.run(handler())

    assert asyncio.run(main()) == [2, 3, 4]
    assert ctx.work.busy_ns == 1 + 2 * (2 + 3 + 4)


def test_a_timed_coroutine_awaited_by_a_timed_one_counts_once() -> None:
    clock = FakeClock()
    meter = HandlerTime(clock)

    async def inner() -> None:
        clock.work(4)
        await asyncio.sleep(0)
        clock.work(6)

    async def outer() -> None:
        clock.work(1)
        await meter.run(inner())

    asyncio.run(meter.run(outer()))  # type: ignore[arg-type]
    assert meter.busy_ns == 11


def test_a_failing_or_cancelled_request_is_charged_its_steps() -> None:
    clock = FakeClock()
    meter = HandlerTime(clock)

    async def fails() -> None:
        clock.work(9)
        raise ValueError("bad input")

    async def cancelled(started: asyncio.Event) -> None:
        clock.work(2)
        started.set()
        try:
            await asyncio.sleep(60)
        finally:
            clock.work(5)  # cleanup runs in the step that delivers the cancellation

    async def main() -> None:
        with pytest.raises(ValueError, match="bad input"):
            await meter.run(fails())
        started = asyncio.Event()
        task = asyncio.ensure_future(meter.run(cancelled(started)))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert meter.busy_ns == 9 + 2 + 5


def test_elapsed_includes_the_step_running_now() -> None:
    clock = FakeClock()
    meter = HandlerTime(clock)
    seen: list[int] = []

    async def handler() -> None:
        clock.work(3)
        await asyncio.sleep(0)
        clock.work(4)
        seen.append(meter.elapsed_ns())  # where the gateway records the quota

    asyncio.run(meter.run(handler()))  # type: ignore[arg-type]
    assert seen == [7]
    assert meter.elapsed_ns() == meter.busy_ns == 7


def test_outside_a_request_measured_leaves_the_coroutine_alone() -> None:
    async def plain() -> int:
        return 1

    async def main() -> int:
        assert current_request.get() is None
        coro = plain()
        assert measured(coro) is coro
        return await coro

    assert asyncio.run(main()) == 1
