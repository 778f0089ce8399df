"""Quota enforcement on the request path: hold a throttled entity's requests, record usage,
and put the throttle time in the response.

Kafka answers a client over its quota with a delay, not an error: the response that crosses the
bound carries `throttle_time_ms`, and the broker mutes the channel for that long. A gRPC gateway
has no channel to mute (calls from one client may even arrive on different connections), so the
hold is per metric entity: a request of an entity that is still held waits that long before it
is handled (bounded by the request's deadline, looked at again every `recheck_ms`, 10 ms in the
gateway, since an answer of the quota service may end it). Produce records its batch bytes when
it is admitted, before it is forwarded, so the concurrent requests of one entity see each
other's usage (recorded after the answer, five requests in flight would all pass one check);
fetch records the bytes of its answer; a fetch whose bytes cross the bound is answered empty
with the throttle time and its bytes are taken back (Kafka's `unrecordQuotaSensor`), and a fetch
arriving while the entity is held is answered empty at once. A fetch's `max_bytes` is capped at
one sample's worth of its quota (Kafka caps at the whole window, `getMaxValueInQuotaWindow`): a
large fetch can then never be emptied forever, and since a fetch beyond the gateway's share is
paid back from later shares, delivery stays smooth.

request_percentage applies to every client request, as Kafka's request quota does: a held
entity's request waits before it is handled, and each request records its handler time
(`context.HandlerTime`: the event loop's time running the request's own code, so waits on
storage, a coordinator or a long poll are not charged, as Kafka charges handler-thread time
and not purgatory time).

All accounting is local (`LocalQuotaView`); the background reporter (`peers/quota.py`) merges
the quota service's cluster-wide holds and allowances into the same view. Everything here is in
plain numbers (bytes, milliseconds, nanoseconds); applying them to the protos (a capped
`max_bytes`, an emptied fetch answer) is `rpc/request_quota.py`'s work.
"""

from __future__ import annotations

import asyncio
import logging

from riverlog.common.clock import Clock
from riverlog.common.quota.entity import QuotaType
from riverlog.common.quota.exchange import LocalQuotaView
from riverlog.common.quota.resolver import QuotaResolver

from .context import UNKNOWN_CLIENT, RequestContext

log = logging.getLogger(__name__)

_PRODUCE_HOLD = (QuotaType.PRODUCE, QuotaType.REQUEST)
_REQUEST_HOLD = (QuotaType.REQUEST,)


def _who(ctx: RequestContext) -> tuple[str, str]:
    """(user, client-id) of a request; a call without client-id is the empty client-id."""
    return ctx.principal, "" if ctx.client_id == UNKNOWN_CLIENT else ctx.client_id


class GatewayQuotas:
    """The enforcement side of one gateway. Lifecycle: built by the app with the view;
    `update_resolver` on every config change. Only the event loop calls it."""

    def __init__(self, view: LocalQuotaView, clock: Clock, recheck_ms: int = 100) -> None:
        self.view = view
        self.clock = clock
        self._recheck_ms = recheck_ms
        self._any = False

    def update_resolver(self, resolver: QuotaResolver) -> None:
        self.view.update_resolver(resolver)
        self._any = len(resolver) > 0

    @property
    def active(self) -> bool:
        """Whether any quota is configured (when not, the request path skips everything)."""
        return self._any

    def remaining_ms(self, kinds: tuple[QuotaType, ...], user: str, client_id: str) -> int:
        return max(self.view.throttle_time_ms(k, user, client_id) for k in kinds)

    async def _hold(self, kinds: tuple[QuotaType, ...], ctx: RequestContext) -> None:
        """Wait while any of `kinds` holds the entity back, looking again at least every
        `recheck_ms` (an answer of the quota service may end a hold early)."""
        user, client_id = _who(ctx)
        while True:
            remaining = self.remaining_ms(kinds, user, client_id)
            budget = ctx.deadline.remaining()
            if remaining <= 0 or budget <= 0:
                return
            await asyncio.sleep(min(remaining, self._recheck_ms, budget * 1000) / 1000)

    async def before_produce(self, ctx: RequestContext, size: int) -> int:
        """Wait while the entity's produce or request quota holds it back, then record the
        request's `size` bytes at once (before it is forwarded, so concurrent requests of
        one entity see each other's usage); the throttle time for its response."""
        if not self._any:
            return 0
        await self._hold(_PRODUCE_HOLD, ctx)
        user, client_id = _who(ctx)
        return self.view.record_local(QuotaType.PRODUCE, user, client_id, size)

    async def before_request(self, ctx: RequestContext) -> None:
        """Wait while the entity's request quota holds it back (any request but produce and
        fetch, which have their own checks)."""
        if self._any:
            await self._hold(_REQUEST_HOLD, ctx)

    def after_request(self, ctx: RequestContext, throttle: int, handler_ns: int) -> int:
        """Record a handled request's time (request_percentage); the response's throttle
        time, the larger of `throttle` and the request quota's."""
        if not self._any:
            return throttle
        user, client_id = _who(ctx)
        return max(throttle, self.view.record_request_time(user, client_id, handler_ns))

    async def before_fetch(self, ctx: RequestContext, max_bytes: int) -> tuple[int, int]:
        """Wait while the request quota holds the entity; then the fetch quota's remaining
        hold (answer empty with it when positive) and the fetch's `max_bytes` capped at one
        sample's worth of the quota (0 or less asks for the cap)."""
        if not self._any:
            return 0, max_bytes
        await self._hold(_REQUEST_HOLD, ctx)
        user, client_id = _who(ctx)
        held = self.view.throttle_time_ms(QuotaType.FETCH, user, client_id)
        if held > 0:
            return held, max_bytes
        resolved = self.view.resolve(QuotaType.FETCH, user, client_id)
        if resolved is not None:
            # Kafka caps at the whole window; one sample's worth keeps delivery smooth, since
            # with the quota service a larger fetch is paid back over several seconds
            window = self.view.manager(QuotaType.FETCH).window
            limit = max(int(resolved.bound * window.sample_ms / 1000), 1)
            if max_bytes <= 0 or max_bytes > limit:
                max_bytes = limit
        return 0, max_bytes

    def judge_grant(self, ctx: RequestContext, kind: QuotaType, budget: int) -> tuple[int, int]:
        """A grant of direct data access (decision 0047) of `budget` bytes for produce or
        fetch (`kind`), judged at once as a fetch is, never held (a held call would hold the
        client's poll or sender): while that quota or the request quota holds the entity back
        nothing is granted; else the budget is capped at one sample's worth of its quota (as a
        fetch's max_bytes) and recorded, and if that takes the entity over the bound its bytes
        are taken back and nothing is granted (Kafka's judgement of a fetch). (throttle time
        for the answer, the budget granted: 0 = none, ask again after the throttle time)."""
        if not self._any:
            return 0, budget
        user, client_id = _who(ctx)
        held = self.remaining_ms((kind, QuotaType.REQUEST), user, client_id)
        if held > 0:
            return held, 0
        resolved = self.view.resolve(kind, user, client_id)
        if resolved is not None:
            window = self.view.manager(kind).window
            budget = min(budget, max(int(resolved.bound * window.sample_ms / 1000), 1))
        throttle = self.view.record_local(kind, user, client_id, budget)
        if self.view.over_quota_ms(kind, user, client_id) <= 0:
            return throttle, budget
        self.view.unrecord_local(kind, user, client_id, budget)
        return max(throttle, 1), 0

    def fetched_records(self, ctx: RequestContext, size: int, handler_ns: int) -> tuple[int, bool]:
        """Record a fetch's `size` bytes and judge: the throttle time for the response, and
        whether the fetch went over the bound (Kafka's judgement; a spent allowance only delays
        the next fetch), in which case its bytes are taken back and the answer must be empty."""
        if not self._any:
            return 0, False
        user, client_id = _who(ctx)
        throttle = self.view.record_local(QuotaType.FETCH, user, client_id, size)
        throttle = max(throttle, self.view.record_request_time(user, client_id, handler_ns))
        if not size or self.view.over_quota_ms(QuotaType.FETCH, user, client_id) <= 0:
            return throttle, False  # within the bound; a spent share only delays the next one
        self.view.unrecord_local(QuotaType.FETCH, user, client_id, size)
        return max(throttle, 1), True
