"""Following one etcd prefix: read everything, then watch from the next revision, and start
over when the watch breaks. The cluster image and the client-quota book each keep a copy of
their own prefix this way; they differ only in what they build from the keys.

etcd3 calls the watch callback on its own thread; the follower hands every response to the
event loop through a queue and applies them there, in order, on one task. A broken watch
(`changes` None) drops what was still queued (the re-read covers it) and re-reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from .store import Change, Entry, EtcdStore

log = logging.getLogger(__name__)

_RETRY_S = 0.5

Load = Callable[[int, dict[str, Entry]], None]
Apply = Callable[[int, list[Change]], None]


class EtcdFollower:
    """Feeds `load(revision, entries)` with a full read (at start and after every broken
    watch) and `apply(revision, changes)` with each watch response; both run on the event loop.

    Lifecycle: `await start()` (returns after the first full read), `await stop()`.
    """

    def __init__(
        self, store: EtcdStore, load: Load, apply: Apply, *, what: str, task_name: str
    ) -> None:
        self.store = store
        self._load = load
        self._apply = apply
        self._what = what
        self._task_name = task_name
        self._inbox: asyncio.Queue[tuple[int, list[Change] | None]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self._reload()
        self._task = asyncio.create_task(self._drain(), name=self._task_name)

    async def stop(self) -> None:
        self.store.cancel_watch()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _reload(self) -> None:
        """Read everything, load it, and watch from the next revision; retries until etcd
        answers."""
        while True:
            try:
                revision, entries = await self.store.read_all()
                self._load(revision, entries)
                await self.store.watch(revision + 1, self._thread_feed())
                return
            except Exception as exc:
                log.warning("cannot read the %s from etcd (%s); retrying", self._what, exc)
                await asyncio.sleep(_RETRY_S)

    def _thread_feed(self) -> Callable[[int, list[Change] | None], None]:
        """A callback for etcd3's watch thread that hands each response to the loop."""
        loop = asyncio.get_running_loop()

        def feed(revision: int, changes: list[Change] | None) -> None:
            loop.call_soon_threadsafe(self._inbox.put_nowait, (revision, changes))

        return feed

    async def _drain(self) -> None:
        while True:
            revision, changes = await self._inbox.get()
            if changes is None:
                self.store.cancel_watch()
                while not self._inbox.empty():
                    self._inbox.get_nowait()
                await self._reload()
                continue
            self._apply(revision, changes)
