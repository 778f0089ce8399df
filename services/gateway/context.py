"""Who is asking and until when: the per-request context every gateway path carries.

The rpc layer builds one `RequestContext` per incoming call (per request on a stream) from the
gRPC metadata (`riverlog-client-id`, the credentials) and deadline; the domain code reads
`deadline` to bound its waits and retries, `client_id` for logs, and (principal, client_id) for
quotas. The same context is published
in a contextvar so log lines written anywhere during the request name the client.
"""

from __future__ import annotations

import contextvars
import logging
import time
from dataclasses import dataclass, field
from typing import Final

# A deadline leaves this much of the client's own deadline unused, so the gateway still has
# time to answer with a per-partition code before the client gives up on the call.
_ANSWER_MARGIN_S: Final = 0.05
_ANSWER_MARGIN_FRACTION: Final = 0.05

UNKNOWN_CLIENT: Final = "-"


@dataclass(frozen=True, slots=True)
class Deadline:
    """A point on the monotonic clock; immutable, so it can be shared by concurrent sub-calls."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + max(seconds, 0.0))

    @classmethod
    def for_call(cls, limit_s: float, client_remaining_s: float | None) -> Deadline:
        """`limit_s` from now, or earlier when the client's gRPC deadline (its remaining
        seconds) comes first, less a margin to answer in."""
        budget = limit_s
        if client_remaining_s is not None:
            margin = min(_ANSWER_MARGIN_S, client_remaining_s * _ANSWER_MARGIN_FRACTION)
            budget = min(budget, client_remaining_s - margin)
        return cls.after(budget)

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(self.at - time.monotonic(), 0.0)

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at

    def earlier(self, seconds: float) -> Deadline:
        """This deadline or `seconds` from now, whichever comes first."""
        return Deadline(min(self.at, time.monotonic() + max(seconds, 0.0)))


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One request as the gateway sees it. Immutable; safe to share across sub-tasks."""

    method: str
    deadline: Deadline
    client_id: str = UNKNOWN_CLIENT
    peer: str = ""
    principal: str = "ANONYMOUS"
    """The authenticated user (see `auth.py`), ANONYMOUS for an unauthenticated call."""
    extra: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.method} from {self.client_id}@{self.peer or '?'}"


current_request: contextvars.ContextVar[RequestContext | None] = contextvars.ContextVar(
    "riverlog_gateway_request", default=None
)


def bind(ctx: RequestContext) -> contextvars.Token[RequestContext | None]:
    """Make `ctx` the current request of this task (and of tasks it starts)."""
    return current_request.set(ctx)


class ClientIdLogFilter(logging.Filter):
    """Adds `client_id` and `rpc` to every log record (`-` outside a request), so a format may
    use `%(client_id)s`."""

    def filter(self, record: logging.LogRecord) -> bool:
        ctx = current_request.get()
        record.client_id = ctx.client_id if ctx else UNKNOWN_CLIENT
        record.rpc = ctx.method if ctx else ""
        return True
