"""`awaitable(Sync.method)`: the asyncio counterpart of a sync client's method, with the same
parameters and return type (checked by mypy through ParamSpec), run off the event loop.

One line per method in the asyncio class instead of a hand-written copy: the sync method stays
the only place its arguments, defaults, checks and errors are defined.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class Wrapper(Protocol):
    """An asyncio client over a sync one: `_sync` is the sync client, `_call` runs a call
    of it off the event loop and awaits the result."""

    @property
    def _sync(self) -> Any: ...

    async def _call(self, fn: Callable[[], T]) -> T: ...


def awaitable(
    method: Callable[Concatenate[Any, P], R],
) -> Callable[Concatenate[Wrapper, P], Coroutine[Any, Any, R]]:
    """`AIOX.m = awaitable(X.m)`: `await aiox.m(...)` runs `x.m(...)` through `aiox._call`
    (the sync client's method as bound at call time, so subclasses and instance overrides,
    such as the transactional producer's `send`, apply)."""
    name = method.__name__

    @functools.wraps(method)
    async def call(self: Wrapper, /, *args: P.args, **kwargs: P.kwargs) -> R:
        bound: Callable[P, R] = getattr(self._sync, name)
        return await self._call(functools.partial(bound, *args, **kwargs))

    return call
