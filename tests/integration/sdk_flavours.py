"""The SDK's two flavours for one behavioural suite (decision 0041): the `sdk` fixture
(conftest.py) hands a test either the sync classes or the asyncio SDK behind the sync method
names, so every assertion of a sync behavioural test is made against `AIOProducer`,
`AIOConsumer` and `AIOAdminClient` too, with no copy of the test.

The asyncio flavour is thin on purpose: each call runs the real asyncio client's method on an
event loop in a background thread (`asyncio.run_coroutine_threadsafe(aio.method(...),
loop).result()`), from the calling thread (a test, or a test's member thread); calls that do not
wait (`subscribe`, `assign`, `assignment`, ...) run on the loop's thread too, as an asyncio
application makes them. Configuration, errors, ordering, groups, listeners, commits, seeks and
transactions are the asyncio client's own. Where the asyncio API differs on purpose, the mapping:

- `Producer.send(...)` returns a future of the delivery after the record is appended, raising
  what the append raises (bad arguments, max.block.ms run out, a transaction state). The asyncio
  `send_nowait` returns one future carrying both; the adapter awaits `AIOProducer._accept` (the
  append as `send_nowait` does it, then the delivery future), and hands out a `RecordFutureView`
  of the delivery: `result(timeout)` (`get`), `exception(timeout)`, `done()` as `RecordFuture`'s.
- `Consumer.commit_sync` is `AIOConsumer.commit_sync` (its `commit`); `with X(...) as x:` is
  `async with` (`close()` awaited).
- A sync rebalance listener is handed to `AIOConsumer.subscribe` as it is: the asyncio consumer
  runs plain listener methods on its worker thread, inside poll, as the sync consumer does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from riverlog.client import AdminClient, ClientTimeoutError, Consumer, Producer, RecordMetadata
from riverlog.client.aio import AIOAdminClient, AIOConsumer, AIOProducer

T = TypeVar("T")


class EventLoopThread:
    """One event loop running in a daemon thread for the test session; every asyncio client of
    the asyncio flavour lives on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="sdk-flavour-loop", daemon=True
        )
        self._thread.start()

    def run(self, make: Callable[[], Awaitable[T]]) -> T:
        """Await `make()` on the loop and return its outcome (or raise its error) here."""

        async def call() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(call(), self.loop).result()

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call a plain function on the loop's thread (it may need the running loop)."""

        async def call() -> T:
            return fn(*args, **kwargs)

        return self.run(call)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        if not self._thread.is_alive():
            self.loop.close()


class SyncView:
    """An asyncio client behind the sync method names: coroutine methods are awaited on the
    loop, plain ones called on the loop's thread, attributes read as they are."""

    def __init__(self, loop: EventLoopThread, aio: Any) -> None:
        self._loop = loop
        self._aio = aio

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._aio, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *args, **kwargs: self._loop.run(lambda: attr(*args, **kwargs))
        if callable(attr):
            return lambda *args, **kwargs: self._loop.call(attr, *args, **kwargs)
        return attr

    def close(self, *args: Any, **kwargs: Any) -> None:
        self._loop.run(lambda: self._aio.close(*args, **kwargs))

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<sync view of {self._aio!r}>"


class RecordFutureView:
    """`RecordFuture`'s waiting methods over the asyncio future of one record's delivery."""

    def __init__(self, loop: EventLoopThread, future: asyncio.Future[RecordMetadata]) -> None:
        self._loop = loop
        self._future = future
        self._outcome: concurrent.futures.Future[RecordMetadata] = concurrent.futures.Future()
        future.add_done_callback(self._done)  # on the loop's thread: `future` is its own

    def _done(self, future: asyncio.Future[RecordMetadata]) -> None:
        error = future.exception()
        if error is not None:
            self._outcome.set_exception(error)
        else:
            self._outcome.set_result(future.result())

    def done(self) -> bool:
        return self._outcome.done()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        self._wait(timeout)
        return self._outcome.result()

    get = result  # Kafka's name, as RecordFuture's

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._wait(timeout)
        return self._outcome.exception()

    def _wait(self, timeout: float | None) -> None:
        """As `RecordFuture`'s wait: ClientTimeoutError when the outcome is not known in time."""
        concurrent.futures.wait([self._outcome], timeout)
        if not self._outcome.done():
            raise ClientTimeoutError(f"no delivery outcome for the record within {timeout} s")


class SyncAIOProducer(SyncView):
    def __init__(
        self, loop: EventLoopThread, conf: Mapping[str, object] | None = None, **kwargs: object
    ) -> None:
        super().__init__(loop, AIOProducer(conf, **kwargs))

    def send(self, *args: Any, **kwargs: Any) -> RecordFutureView:
        aio: AIOProducer = self._aio

        async def accept() -> RecordFutureView:
            return RecordFutureView(self._loop, await aio._accept(*args, **kwargs))

        return self._loop.run(accept)


class SyncAIOConsumer(SyncView):
    def __init__(
        self, loop: EventLoopThread, conf: Mapping[str, object] | None = None, **kwargs: object
    ) -> None:
        super().__init__(loop, AIOConsumer(conf, **kwargs))


class SyncAIOAdminClient(SyncView):
    def __init__(
        self, loop: EventLoopThread, conf: Mapping[str, object] | None = None, **kwargs: object
    ) -> None:
        super().__init__(loop, AIOAdminClient(conf, **kwargs))


@dataclass(frozen=True)
class Sdk:
    """One flavour: `sdk.Producer(conf, **kwargs)`, `sdk.Consumer(...)`, `sdk.AdminClient(...)`
    build its clients with the sync classes' arguments."""

    name: str
    Producer: Callable[..., Any]
    Consumer: Callable[..., Any]
    AdminClient: Callable[..., Any]

    def __repr__(self) -> str:
        return self.name


SYNC = Sdk("sync", Producer, Consumer, AdminClient)


def asyncio_sdk(loop: EventLoopThread) -> Sdk:
    def bind(cls: Callable[..., Any]) -> Callable[..., Any]:
        return lambda conf=None, **kwargs: cls(loop, conf, **kwargs)

    return Sdk("asyncio", bind(SyncAIOProducer), bind(SyncAIOConsumer), bind(SyncAIOAdminClient))
