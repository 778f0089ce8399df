"""The storage node's side of direct data access (decision 0047): which grants it took, how many
bytes each has left on this node, and the counters `/metrics` serves.

A grant arrives as a grant frame on the direct port (`rpc/zerocopy.py` in grant mode); the
ledger checks it (`riverlog.common.grants.verify_grant`: MAC, node id, expiry against this
node's wall clock) and keeps its remaining byte budget by grant id, so a grant used on several
connections at once shares one budget. Each fetch or produce frame under it asks `refusal`
first (expired, or budget spent: DELEGATION_TOKEN_EXPIRED), then pays before any byte is read
or appended, so concurrent connections under one grant cannot each spend the same remainder:

- a produce frame pays its length plus `FRAME_CHARGE_BYTES` (`take_produce`); a frame costing
  more than the budget left is refused and empties the budget, so the refusal holds on every
  connection of the grant;
- a fetch frame pays its length plus `FRAME_CHARGE_BYTES` and reserves the records it may read,
  `min(max_bytes, left)` (`reserve_fetch`); once its results are known, before a byte is sent,
  `settle_fetch` charges the record bytes read instead (more than the reservation when a
  first whole batch is larger: a fetch overdraws by at most one batch) and returns only the
  difference. Nothing is returned when the send fails: a client resetting the connection
  mid-answer has paid.

Budgets of expired grants are forgotten at the next grant frame that arrives after them, so the
table holds at most the grants alive at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from riverlog.common.clock import Clock
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.grants import FRAME_CHARGE_BYTES, Grant, verify_grant


@dataclass(slots=True)
class _Budget:
    remaining: int
    expires_at_ms: int


class GrantLedger:
    """One per storage node with a direct-access key. Event loop only."""

    def __init__(self, key: bytes, node_id: int, clock: Clock) -> None:
        self._key = key
        self.node_id = node_id
        self.clock = clock
        self._budgets: dict[bytes, _Budget] = {}
        self._next_sweep_ms = 0
        self.accepted = 0
        """Grant frames accepted (riverlog_direct_grants{result="accepted"})."""
        self.refused = 0
        """Grant frames refused: bad MAC, malformed, another node's, expired."""
        self.bytes_read = 0
        """Record bytes sent to fetches under grants."""
        self.bytes_written = 0
        """Produce frame bytes taken under grants."""
        self.exhausted = 0
        """Frames answered DELEGATION_TOKEN_EXPIRED (budget spent or grant expired)."""

    def admit(self, data: bytes | bytearray | memoryview) -> Grant:
        """The grant in a grant frame; raises RiverlogError (SASL_AUTHENTICATION_FAILED or
        DELEGATION_TOKEN_EXPIRED) when refused."""
        now = self.clock.time_ms()
        self._sweep(now)
        try:
            grant = verify_grant(data, self._key, self.node_id, now)
        except RiverlogError:
            self.refused += 1
            raise
        self.accepted += 1
        if grant.grant_id not in self._budgets:
            self._budgets[grant.grant_id] = _Budget(grant.byte_budget, grant.expires_at_ms)
        return grant

    def _sweep(self, now_ms: int) -> None:
        if now_ms < self._next_sweep_ms:
            return
        expired = [gid for gid, b in self._budgets.items() if b.expires_at_ms <= now_ms]
        for gid in expired:
            del self._budgets[gid]
        soonest = min((b.expires_at_ms for b in self._budgets.values()), default=now_ms)
        self._next_sweep_ms = max(soonest, now_ms + 1)

    def remaining(self, grant: Grant) -> int:
        budget = self._budgets.get(grant.grant_id)
        return budget.remaining if budget is not None else 0

    def refusal(self, grant: Grant) -> RiverlogError | None:
        """Why a frame under `grant` is refused now (DELEGATION_TOKEN_EXPIRED), or None."""
        if self.clock.time_ms() >= grant.expires_at_ms:
            self.exhausted += 1
            return RiverlogError(
                "the grant expired: ask the gateway for a new one",
                ErrorCode.DELEGATION_TOKEN_EXPIRED,
            )
        if self.remaining(grant) <= 0:
            self.exhausted += 1
            return RiverlogError(
                f"the grant's {grant.byte_budget} bytes on node {self.node_id} are spent:"
                " ask the gateway for a new one",
                ErrorCode.DELEGATION_TOKEN_EXPIRED,
            )
        return None

    def _spent(self, grant: Grant, budget: _Budget | None) -> RiverlogError:
        """Refuse a frame the budget left cannot pay for, and empty the budget so the refusal
        holds for every connection of the grant."""
        if budget is not None:
            budget.remaining = min(budget.remaining, 0)
        self.exhausted += 1
        return RiverlogError(
            f"the grant's {grant.byte_budget} bytes on node {self.node_id} do not pay for this"
            " frame: ask the gateway for a new one",
            ErrorCode.DELEGATION_TOKEN_EXPIRED,
        )

    def take_produce(self, grant: Grant, frame_size: int) -> RiverlogError | None:
        """Charge a produce frame of `frame_size` bytes before it is appended; the refusal
        (DELEGATION_TOKEN_EXPIRED) when it costs more than the budget left."""
        budget = self._budgets.get(grant.grant_id)
        cost = frame_size + FRAME_CHARGE_BYTES
        if budget is None or cost > budget.remaining:
            return self._spent(grant, budget)
        budget.remaining -= cost
        self.bytes_written += frame_size
        return None

    def reserve_fetch(self, grant: Grant, frame_size: int, max_bytes: int) -> int | RiverlogError:
        """Charge a fetch frame of `frame_size` bytes and reserve the record bytes it may read:
        `max_bytes` (>= 0) capped at the budget left. The refusal (DELEGATION_TOKEN_EXPIRED)
        when the budget left does not pay for the frame and one record byte."""
        budget = self._budgets.get(grant.grant_id)
        cost = frame_size + FRAME_CHARGE_BYTES
        if budget is None or budget.remaining - cost <= 0:
            return self._spent(grant, budget)
        left = budget.remaining - cost
        reserved = max(min(max_bytes, left), 0)
        budget.remaining -= cost + reserved
        return reserved

    def settle_fetch(self, grant: Grant, reserved: int, read: int) -> None:
        """A fetch that reserved `reserved` record bytes read `read` (before sending them):
        charge those instead (the difference either way)."""
        budget = self._budgets.get(grant.grant_id)
        if budget is not None:
            budget.remaining += reserved - read
        self.bytes_read += read

    @property
    def live_grants(self) -> int:
        return len(self._budgets)
