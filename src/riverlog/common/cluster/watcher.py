"""Follow the cluster image by push: one Watch stream to a metadata instance (a snapshot, then
deltas), moving to another instance whenever the stream breaks.

Storage nodes, gateways, coordinators and quota instances keep their view of topics, leaders
and live nodes in a `MetadataWatcher`; they never poll the metadata service. The watcher also
hands the live metadata instances of each image to its client, so the process fails over to
instances added after it started and stops trying removed ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Callable

from riverlog.common.errors import ErrorCode, RiverlogError

from .client import MetadataClient
from .convert import apply_update
from .image import ClusterImage, Listener

log = logging.getLogger(__name__)

_RECONNECT_START_S = 0.05
_RECONNECT_MAX_S = 1.0


class MetadataWatcher:
    """The current `ClusterImage`, kept by a task on the caller's event loop.

    Lifecycle: `await start()` returns once the first snapshot arrived; `image` is then always
    a complete image; listeners run in that task after each change, in order, with the old and
    the new image (a listener that raises is logged and skipped); `await stop()` ends it.
    """

    def __init__(self, client: MetadataClient, watcher_id: int = -1) -> None:
        self.client = client
        self.watcher_id = watcher_id
        self.image = ClusterImage.empty()
        self._listeners: list[Listener] = []
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._first_snapshot = asyncio.Event()

    def add_listener(self, callback: Listener) -> None:
        self._listeners.append(callback)

    def remove_listener(self, callback: Listener) -> None:
        self._listeners.remove(callback)

    async def start(self, timeout_s: float | None = 30.0) -> ClusterImage:
        """Start following; returns the first snapshot's image. Raises RiverlogError
        (REQUEST_TIMED_OUT) when no instance answered within `timeout_s`."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="metadata-watcher")
        try:
            async with asyncio.timeout(timeout_s):
                await self._first_snapshot.wait()
        except TimeoutError:
            await self.stop()
            raise RiverlogError(
                "no metadata snapshot arrived in time", ErrorCode.REQUEST_TIMED_OUT
            ) from None
        return self.image

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def wait_for(
        self, predicate: Callable[[ClusterImage], bool], timeout_s: float = 30.0
    ) -> ClusterImage:
        """The first image (the current one included) satisfying `predicate`; raises
        RiverlogError(REQUEST_TIMED_OUT) after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        async with self._changed:
            while not predicate(self.image):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RiverlogError(
                        "the cluster image did not reach the expected state in time",
                        ErrorCode.REQUEST_TIMED_OUT,
                    )
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await self._changed.wait()
            return self.image

    async def _run(self) -> None:
        backoff = _RECONNECT_START_S
        while True:
            address = self.client.current_address
            try:
                async for update in self.client.watch(self.watcher_id):
                    await self._set(apply_update(self.image, update))
                    if update.snapshot:
                        self._first_snapshot.set()
                        backoff = _RECONNECT_START_S
                log.info("metadata watch on %s ended; reconnecting", address)
            except RiverlogError as exc:
                log.info("metadata watch on %s broke (%s); reconnecting", address, exc)
            self.client.advance()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _RECONNECT_MAX_S)

    async def _set(self, new: ClusterImage) -> None:
        old = self.image
        if new is old:
            return
        self.image = new
        if new.metadata_addresses != old.metadata_addresses:
            self.client.use_addresses(new.metadata_addresses)
        for listener in list(self._listeners):
            try:
                result = listener(old, new)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("metadata listener failed")
        async with self._changed:
            self._changed.notify_all()
