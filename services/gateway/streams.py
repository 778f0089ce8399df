"""Bidirectional streams (ProduceStream, FetchStream): requests handled concurrently, answered
as each completes, with a bound on how many one stream may have in progress.

Requests are read in order and each is started at once in its own task (so the leaders are
asked in the order the client sent, which keeps a partition's batches in order while routes are
stable); responses carry the request's correlation id and leave in completion order (a request that
wants no answer, produce with acks=0 as in Kafka, gets none). Reading
stops while `max_in_flight` requests are started but not yet written back, so a slow reader of
responses slows its own writer instead of growing the gateway's memory. Tasks inherit the
stream's context, so tracing and the request context flow into the calls they make.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Resp = TypeVar("Resp")


class _End:
    """Marks the end of the request stream in the response queue."""


class _Pushed(Generic[Resp]):
    """A response sent unasked (it holds no slot)."""

    __slots__ = ("response",)

    def __init__(self, response: Resp) -> None:
        self.response = response


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class Pipeline(Generic[Req, Resp]):
    """One stream's pipeline. Lifecycle: create per stream, iterate `run()` once; leaving the
    iteration early (the client went away) cancels whatever is still in progress."""

    def __init__(self, handle: Callable[[Req], Awaitable[Resp | None]], max_in_flight: int) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self._handle = handle
        self._slots = asyncio.Semaphore(max_in_flight)
        self._out: asyncio.Queue[Resp | _Pushed[Resp] | _End | _Failed | None] = asyncio.Queue()
        self._tasks: set[asyncio.Task[None]] = set()

    async def _one(self, request: Req) -> None:
        try:
            response = await self._handle(request)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # ends the stream with the interceptor's mapping
            self._out.put_nowait(_Failed(exc))
            return
        self._out.put_nowait(response)

    def push(self, response: Resp) -> None:
        """Send `response` unasked, after the responses already finished (FetchStream's pushed
        answers, `pushes.py`)."""
        self._out.put_nowait(_Pushed(response))

    async def _read(self, requests: AsyncIterator[Req]) -> None:
        try:
            async for request in requests:
                await self._slots.acquire()
                task = asyncio.create_task(self._one(request))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            while self._tasks:
                await asyncio.wait(list(self._tasks))
            self._out.put_nowait(_End())
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the request stream broke (client cancelled, bad message)
            self._out.put_nowait(_Failed(exc))

    async def run(self, requests: AsyncIterator[Req]) -> AsyncIterator[Resp]:
        reader = asyncio.create_task(self._read(requests))
        try:
            while True:
                item = await self._out.get()
                if isinstance(item, _End):
                    return
                if isinstance(item, _Failed):
                    raise item.error
                if isinstance(item, _Pushed):
                    yield item.response
                    continue
                self._slots.release()
                if item is not None:  # None: a request that wants no answer (acks=0)
                    yield item
        finally:
            reader.cancel()
            for task in list(self._tasks):
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
