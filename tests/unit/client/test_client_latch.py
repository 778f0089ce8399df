"""`Latch`: the batch result's one-shot Event made of one lock (decision 0015's addendum)."""

from __future__ import annotations

import threading

from riverlog.client.producer.future import Latch


def test_wait_times_out_until_set_then_returns_at_once() -> None:
    latch = Latch()
    assert not latch.is_set()
    assert latch.wait(0.01) is False
    assert latch.wait(0) is False
    latch.set()
    latch.set()  # a second set changes nothing
    assert latch.is_set()
    assert latch.wait() is True
    assert latch.wait(0) is True


def test_set_wakes_every_waiter_and_waiting_leaves_it_set() -> None:
    latch = Latch()
    woken: list[bool] = []
    started = threading.Barrier(5)

    def waiter() -> None:
        started.wait()
        woken.append(latch.wait(30))

    threads = [threading.Thread(target=waiter) for _ in range(4)]
    for thread in threads:
        thread.start()
    started.wait()
    latch.set()
    for thread in threads:
        thread.join(30)
    assert woken == [True] * 4
    assert latch.is_set()  # a waiter holding the lock a moment does not make it look unset


def test_concurrent_sets_release_the_lock_once() -> None:
    latch = Latch()
    threads = [threading.Thread(target=latch.set) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert latch.wait(0)
    assert latch._lock.acquire(False)  # released exactly once: free, not over-released
