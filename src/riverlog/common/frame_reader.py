"""Exact-size reads on an asyncio connection straight into the caller's buffer, for the
zero-copy channel's fetch answers (`zerocopy.AsyncZeroCopyFetchClient`).

asyncio's StreamReader copies every byte three or four times before `readexactly` returns it:
the event loop hands each read over as a new bytes object, the reader appends it to its buffer
(growing it, which copies it again), and `readexactly` copies the bytes it returns out of the
buffer. For a 1 MiB fetch answer on the gateway those copies were a fifth of its CPU at 1 KiB
records (issue 10; decision 0016, addendum). `FrameReader` is a BufferedProtocol instead: the
loop reads from the socket into the buffer that `read_into` is filling, so the kernel's copy is
the only one. Bytes that arrive while no read waits (the next frame's header, usually) go to a
small stash that the next read takes first; reading pauses when the stash passes
`STASH_LIMIT`, so nothing larger ever piles up there.
"""

from __future__ import annotations

import asyncio
from typing import Final, cast

STASH_LIMIT: Final = 64 * 1024


class FrameReader(asyncio.BufferedProtocol):
    """One connection's protocol; one `read_into` at a time (its user holds a lock)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._target: memoryview | None = None
        self._filled = 0
        self._waiter: asyncio.Future[None] | None = None
        self._spare = bytearray(STASH_LIMIT)
        self._stash = bytearray()
        self._paused = False
        self._lost: BaseException | None = None

    # ---- asyncio's side ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a TCP transport (uvloop's does not subclass asyncio.Transport, hence the cast)
        self.transport = cast(asyncio.Transport, transport)

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._target is not None:
            return self._target[self._filled :]
        return memoryview(self._spare)

    def buffer_updated(self, nbytes: int) -> None:
        if self._target is None:
            self._stash += self._spare[:nbytes]
            if len(self._stash) >= STASH_LIMIT and not self._paused and self.transport:
                self.transport.pause_reading()
                self._paused = True
            return
        self._filled += nbytes
        if self._filled == len(self._target):
            self._target = None
            self._wake(None)

    def eof_received(self) -> bool:
        return False  # the transport closes; connection_lost tells the waiter

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or ConnectionResetError("the storage node closed the connection")
        self._target = None
        self._wake(self._lost)

    def _wake(self, error: BaseException | None) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            if error is None:
                waiter.set_result(None)
            else:
                waiter.set_exception(error)

    # ---- the caller's side ------------------------------------------------------------------

    async def read_into(self, view: memoryview) -> None:
        """Fill `view` exactly; raises ConnectionResetError (an OSError) when the connection
        ends first."""
        taken = min(len(self._stash), len(view))
        if taken:
            view[:taken] = self._stash[:taken]
            del self._stash[:taken]
        if taken == len(view):
            return
        if self._lost is not None:
            raise self._lost
        self._target = view[taken:]
        self._filled = 0
        self._waiter = asyncio.get_running_loop().create_future()
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        try:
            await self._waiter
        finally:
            self._target = None  # cancelled mid-read: the connection is closed by its user

    async def read_exactly(self, size: int) -> bytearray:
        out = bytearray(size)
        await self.read_into(memoryview(out))
        return out
