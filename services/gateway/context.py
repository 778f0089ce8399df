"""Who is asking and until when: the per-request context every gateway path carries.

The rpc layer builds one `RequestContext` per incoming call (per request on a stream) from the
gRPC metadata (`riverlog-client-id`, the credentials) and deadline; the domain code reads
`deadline` to bound its waits and retries, `client_id` for logs, and (principal, client_id) for
quotas. The same context is published
in a contextvar so log lines written anywhere during the request name the client.

`HandlerTime` is the asyncio counterpart of Kafka's request-handler-thread time: the time the
event loop spent running one request's own code, step by step between awaits, so the waits on
storage, a coordinator, the metadata service, a retry backoff or other requests' work are left
out. It is what request_percentage quotas are charged.
"""

from __future__ import annotations

import contextvars
import logging
import math
import time
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from riverlog.common.clock import SYSTEM_CLOCK, Clock

# A deadline leaves this much of the client's own deadline unused, so the gateway still has
# time to answer with a per-partition code before the client gives up on the call.
_ANSWER_MARGIN_S: Final = 0.05
_ANSWER_MARGIN_FRACTION: Final = 0.05

UNKNOWN_CLIENT: Final = "-"

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Deadline:
    """A point on the injected monotonic clock, in whole milliseconds; immutable, so it can be
    shared by concurrent sub-calls. The clock is injected so tests move a `ManualClock` instead
    of sleeping.

    The point is kept in the clock's own unit (its ticks are milliseconds), and budgets are
    rounded up to a whole millisecond: so a deadline that has not expired has at least 1 ms
    left, and a wait of `remaining()` always ends past it. With a point in float seconds,
    `now_ms / 1000 + budget` could round to a hair past a tick: the deadline then stayed
    unexpired for a whole millisecond with ~0 s remaining, and a caller that waits
    `remaining()` and tries again did so at once, over and over, until the clock ticked.
    """

    at_ms: int
    clock: Clock = field(default=SYSTEM_CLOCK, compare=False, repr=False)

    @classmethod
    def after(cls, seconds: float, clock: Clock = SYSTEM_CLOCK) -> Deadline:
        return cls(clock.monotonic_ms() + _ceil_ms(seconds), clock)

    @classmethod
    def for_call(
        cls, limit_s: float, client_remaining_s: float | None, clock: Clock = SYSTEM_CLOCK
    ) -> Deadline:
        """`limit_s` from now, or earlier when the client's gRPC deadline (its remaining
        seconds) comes first, less a margin to answer in."""
        budget = limit_s
        if client_remaining_s is not None:
            margin = min(_ANSWER_MARGIN_S, client_remaining_s * _ANSWER_MARGIN_FRACTION)
            budget = min(budget, client_remaining_s - margin)
        return cls.after(budget, clock)

    def remaining(self) -> float:
        """Seconds left: 0.0 once expired, else at least 0.001."""
        return max(self.at_ms - self.clock.monotonic_ms(), 0) / 1000

    @property
    def expired(self) -> bool:
        return self.clock.monotonic_ms() >= self.at_ms

    def earlier(self, seconds: float) -> Deadline:
        """This deadline or `seconds` from now, whichever comes first."""
        return Deadline(min(self.at_ms, self.clock.monotonic_ms() + _ceil_ms(seconds)), self.clock)


def _ceil_ms(seconds: float) -> int:
    """`seconds` as whole milliseconds, rounded up (0 for none or less); a product that float
    arithmetic put a hair above a whole number (0.3 * 1000) is not rounded up."""
    if seconds <= 0:
        return 0
    return math.ceil(seconds * 1000 - 1e-6)


class HandlerTime:
    """Nanoseconds the event loop spent running one request's coroutines.

    `run(coro)` times every step of `coro` (each `send`/`throw` from one await to the next);
    a request's sub-tasks (one per storage node of a produce, say) are timed by wrapping their
    coroutines with `measured`, and their steps add up, since only one step runs at a time on
    the loop. A step of a timed coroutine that runs inside another timed step (a timed
    coroutine awaited directly by a timed one) is not counted twice.
    """

    __slots__ = ("_step_started", "busy_ns", "clock")

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.clock = clock
        self.busy_ns = 0
        self._step_started: int | None = None  # when the running step of this request began

    def run(self, coro: Coroutine[Any, Any, _T]) -> Coroutine[Any, Any, _T]:
        """`coro`, with its steps counted here."""
        return _TimedCoroutine(coro, self)

    def elapsed_ns(self) -> int:
        """The time counted so far, including the step running now, if any."""
        if self._step_started is not None:
            return self.busy_ns + self.clock() - self._step_started
        return self.busy_ns


class _TimedCoroutine(Coroutine[Any, Any, _T]):
    """A coroutine that adds the duration of each step of the one it wraps to a HandlerTime.
    It is a `collections.abc.Coroutine`, so asyncio accepts it wherever a coroutine goes
    (`await`, `create_task`, `gather`)."""

    __slots__ = ("_coro", "_meter")

    def __init__(self, coro: Coroutine[Any, Any, _T], meter: HandlerTime) -> None:
        self._coro = coro
        self._meter = meter

    def send(self, value: Any) -> Any:
        meter = self._meter
        if meter._step_started is not None:
            return self._coro.send(value)
        started = meter._step_started = meter.clock()
        try:
            return self._coro.send(value)
        finally:
            meter.busy_ns += meter.clock() - started
            meter._step_started = None

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> Any:
        meter = self._meter
        if meter._step_started is not None:
            return self._throw(typ, val, tb)
        started = meter._step_started = meter.clock()
        try:
            return self._throw(typ, val, tb)
        finally:
            meter.busy_ns += meter.clock() - started
            meter._step_started = None

    def _throw(self, typ: Any, val: Any, tb: Any) -> Any:
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)

    def close(self) -> None:
        self._coro.close()

    def __await__(self) -> Generator[Any, None, _T]:
        return self

    def __iter__(self) -> _TimedCoroutine[_T]:
        return self

    def __next__(self) -> Any:
        return self.send(None)


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request as the gateway sees it. Immutable but for its handler-time meter (which
    only the event loop touches); safe to share across sub-tasks."""

    method: str
    deadline: Deadline
    client_id: str = UNKNOWN_CLIENT
    peer: str = ""
    principal: str = "ANONYMOUS"
    """The authenticated user (see `auth.py`), ANONYMOUS for an unauthenticated call."""
    extra: dict[str, str] = field(default_factory=dict)
    work: HandlerTime = field(default_factory=HandlerTime, compare=False)
    """This request's handler time (request_percentage quotas)."""
    call: object = field(default=None, compare=False, repr=False)
    """The gRPC call this context was made for, so the call's handler finds it again."""

    def __str__(self) -> str:
        return f"{self.method} from {self.client_id}@{self.peer or '?'}"


current_request: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar(
    "riverlog_gateway_request", default=None
)


def bind(ctx: RequestContext) -> contextvars.Token[RequestContext | None]:
    """Make `ctx` the current request of this task (and of tasks it starts)."""
    return current_request.set(ctx)


def measured(coro: Coroutine[Any, Any, _T]) -> Coroutine[Any, Any, _T]:
    """`coro` timed into the current request's handler time (as it is outside a request);
    for the coroutines a request hands to new tasks, whose steps its own timing cannot see."""
    ctx = current_request.get()
    return coro if ctx is None else ctx.work.run(coro)


class ClientIdLogFilter(logging.Filter):
    """Adds `client_id` and `rpc` to every log record (`-` outside a request), so a format may
    use `%(client_id)s`."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = current_request.get()
        record.client_id = ctx.client_id if ctx else UNKNOWN_CLIENT
        record.rpc = ctx.method if ctx else ""
        return True
