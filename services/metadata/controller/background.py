"""The controller's background loops share two steps: sleep until an image change sets the
loop's event (or a bound passes, so a missed wake-up only delays), and cancel the loops at
shutdown without swallowing the caller's own cancellation."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable
from typing import Any


async def wait_woken(wake: asyncio.Event, timeout_s: float) -> None:
    """Until `wake` is set or `timeout_s` passed; then clear it for the next round."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(timeout_s):
            await wake.wait()
    wake.clear()


async def cancel_all(tasks: Iterable[asyncio.Task[Any] | None]) -> None:
    """Cancel every task, then wait for each to end."""
    running = [t for t in tasks if t is not None]
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError):
            await task
