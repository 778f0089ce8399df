"""The storage node's background chores, each on its own period: write the offset checkpoints
(`log.flush.offset.checkpoint.interval.ms`), apply retention (`log.retention.check.interval.ms`)
and fsync the logs whose `flush.ms` has passed (`log.flush.scheduler.interval.ms`).

Kafka runs these on a scheduler thread pool; here they are asyncio tasks on the event loop that
owns the logs, so they never race an append (the log layer is single-threaded by design). Each
chore is short: a checkpoint writes a few small files, retention deletes whole segments.
A chore that fails is logged and tried again at its next period.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from riverlog.common.clock import Clock

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Chore:
    name: str
    interval_ms: int
    run: Callable[[], object]


class PeriodicTasks:
    """Lifecycle: `add()` chores, `start()` on the event loop, `await stop()` at shutdown
    (cancels the sleeps; a chore in progress finishes first since chores do not await)."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._chores: list[Chore] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.runs: dict[str, int] = {}

    def add(self, name: str, interval_ms: int, run: Callable[[], object]) -> None:
        if interval_ms <= 0:
            raise ValueError(f"{name}: the interval must be positive, got {interval_ms}")
        self._chores.append(Chore(name, interval_ms, run))
        self.runs[name] = 0

    def start(self) -> None:
        for chore in self._chores:
            self._tasks.append(asyncio.create_task(self._loop(chore), name=f"chore-{chore.name}"))

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def run_now(self, name: str) -> None:
        """Run one chore at once (tests, and shutdown paths that want a last checkpoint)."""
        for chore in self._chores:
            if chore.name == name:
                self._run(chore)
                return
        raise KeyError(name)

    async def _loop(self, chore: Chore) -> None:
        while True:
            await asyncio.sleep(chore.interval_ms / 1000.0)
            self._run(chore)

    def _run(self, chore: Chore) -> None:
        start = self._clock.monotonic_ms()
        try:
            chore.run()
        except Exception:
            log.exception("%s failed; trying again in %d ms", chore.name, chore.interval_ms)
            return
        self.runs[chore.name] += 1
        took = self._clock.monotonic_ms() - start
        if took > 1000:
            log.warning("%s took %d ms on the event loop", chore.name, took)
