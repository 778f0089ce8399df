"""The purgatory wakes waiters by key, expires them at their deadline, and leaves nothing
registered behind (completed, expired or cancelled). Short real waits with bounded deadlines;
no assertion on how long anything took."""

import asyncio

import pytest

from riverlog.common.types import TopicPartition
from riverlog.services.storage.replica.purgatory import DelayedFetch, DelayedProduce, Purgatory

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


async def test_satisfied_now_returns_without_registering() -> None:
    purgatory: Purgatory[TopicPartition] = Purgatory()
    assert await purgatory.wait_until([TP0], lambda: True, 10_000)
    assert len(purgatory) == 0


async def test_expires_when_nothing_happens() -> None:
    purgatory: Purgatory[TopicPartition] = Purgatory()
    assert not await purgatory.wait_until([TP0], lambda: False, 20)
    assert len(purgatory) == 0


async def test_notify_checks_and_completes_only_satisfied_waiters() -> None:
    purgatory: Purgatory[TopicPartition] = Purgatory()
    state = {"bytes": 0}
    waiter = asyncio.create_task(
        purgatory.wait_until([TP0, TP1], lambda: state["bytes"] >= 10, 60_000)
    )
    await asyncio.sleep(0)
    assert len(purgatory) == 2  # one waiter under each key

    state["bytes"] = 5  # not enough: checked in notify, stays registered, not woken
    checks = purgatory.checks
    assert purgatory.notify(TP1) == 0
    assert purgatory.checks == checks + 1
    assert len(purgatory) == 2
    await asyncio.sleep(0)
    assert not waiter.done()

    state["bytes"] = 12
    assert purgatory.notify(TP0) == 1
    assert await asyncio.wait_for(waiter, 5)
    assert len(purgatory) == 0


async def test_a_condition_that_raises_completes_its_waiter() -> None:
    purgatory: Purgatory[TopicPartition] = Purgatory()
    armed = {"raise": False}

    def satisfied() -> bool:
        if armed["raise"]:
            raise RuntimeError("the partition went away")
        return False

    waiter = asyncio.create_task(purgatory.wait_until([TP0], satisfied, 60_000))
    await asyncio.sleep(0)
    armed["raise"] = True
    assert purgatory.notify(TP0) == 1  # the notifier is not hurt; the waiter runs on
    assert await asyncio.wait_for(waiter, 5)
    assert len(purgatory) == 0


async def test_two_waiters_on_one_key_complete_independently() -> None:
    purgatory: Purgatory[TopicPartition] = Purgatory()
    hw = {"value": 0}
    first = asyncio.create_task(purgatory.wait_until([TP0], lambda: hw["value"] > 1, 60_000))
    second = asyncio.create_task(purgatory.wait_until([TP0], lambda: hw["value"] > 5, 60_000))
    await asyncio.sleep(0)
    hw["value"] = 3
    assert purgatory.notify(TP0) == 1
    assert await asyncio.wait_for(first, 5)
    assert not second.done() and len(purgatory) == 1
    hw["value"] = 6
    assert purgatory.notify(TP0) == 1
    assert await asyncio.wait_for(second, 5)
    assert len(purgatory) == 0


async def test_notify_other_key_does_not_wake() -> None:
    purgatory: Purgatory[TopicPartition] = Purgatory()
    checks = 0

    def satisfied() -> bool:
        nonlocal checks
        checks += 1
        return False

    waiter = asyncio.create_task(purgatory.wait_until([TP0], satisfied, 60_000))
    await asyncio.sleep(0)
    assert purgatory.notify(TP1) == 0
    await asyncio.sleep(0)
    assert checks == 1 and not waiter.done()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert len(purgatory) == 0


async def test_close_releases_waiters_with_their_state() -> None:
    purgatory: Purgatory[TopicPartition] = Purgatory()
    waiter = asyncio.create_task(purgatory.wait_until([TP0], lambda: False, 60_000))
    await asyncio.sleep(0)
    purgatory.close()
    assert await asyncio.wait_for(waiter, 5) is False
    assert await purgatory.wait_until([TP0], lambda: False, 60_000) is False


async def test_delayed_fetch_completes_on_bytes_or_error() -> None:
    purgatory: Purgatory[TopicPartition] = Purgatory()
    available = {"size": 0, "error": False}
    fetch = DelayedFetch(
        purgatory, [TP0], 100, 60_000, lambda: (available["size"], available["error"])
    )
    assert not fetch.try_complete()
    task = asyncio.create_task(fetch.wait())
    await asyncio.sleep(0)
    available["size"] = 100
    purgatory.notify(TP0)
    assert await asyncio.wait_for(task, 5)

    available.update(size=0, error=True)
    assert await DelayedFetch(purgatory, [TP0], 100, 60_000, lambda: (0, True)).wait()


async def test_delayed_fetch_expires_with_too_few_bytes() -> None:
    purgatory: Purgatory[TopicPartition] = Purgatory()
    fetch = DelayedFetch(purgatory, [TP0], 100, 10, lambda: (99, False))
    assert await fetch.wait() is False


async def test_delayed_produce_waits_for_acknowledgement() -> None:
    purgatory: Purgatory[TopicPartition] = Purgatory()
    hw = {"value": 0}
    produce = DelayedProduce(purgatory, [TP0], 60_000, lambda: hw["value"] > 9)
    task = asyncio.create_task(produce.wait())
    await asyncio.sleep(0)
    hw["value"] = 10
    purgatory.notify(TP0)
    assert await asyncio.wait_for(task, 5)
    assert await DelayedProduce(purgatory, [TP0], 0, lambda: False).wait() is False
