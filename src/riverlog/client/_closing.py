"""The context-manager behaviour every client shares: `with Producer(...) as p:` closes it, and
`async with AIOProducer(...) as p:` the asyncio ones."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closing:
    """Mixin for clients with an idempotent `close()`; `__exit__` calls it."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClosing:
    """Mixin for asyncio clients with an idempotent `async close()`; `__aexit__` awaits it."""

    async def close(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
