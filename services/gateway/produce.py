"""Produce of pre-encoded record batches: check, split by leader, forward untouched, merge.

This is the SDK's hot path. The gateway reads nothing of a batch beyond the framing of its
headers (magic and lengths, to refuse garbage before it travels), so the bytes a producer
encoded are the bytes the leader validates, stamps with offsets and stores. Each request's
partitions are grouped by leader and sent to all leaders at once; partitions whose leader turned
out stale are re-routed and re-sent alone (see `routing.router`); results come back in request
order. `produce_or_fail` is the stream flavour: a bad request becomes per-partition errors
instead of ending the stream.

A stream's requests are handled in tasks of their own, so a partition re-sent after a stale
route could land behind a later request of the same stream that went straight to the new
leader. Batches with a producer id are kept in order by their leader (sequence numbers);
those without are not, so such a partition is re-sent only while no later request of its
stream names it (`StreamOrder`): else its retriable error goes back to the client, whose
`retries` and max.in.flight.requests.per.connection then decide, as Kafka's (only a client
retry with more than one request in flight may reorder a partition's records).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from riverlog.common.cluster.image import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.types import Acks, TopicPartition

from .config import GatewayConfig
from .context import Deadline, RequestContext
from .routing.router import Router, merge
from .validation import batch_payload_error, internal_topic_error, item_errors, require

log = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1


_ACKS = frozenset(Acks)


@dataclass(frozen=True, slots=True)
class ProduceOptions:
    """The request-wide part of a produce. `timeout_ms` is how long the leader may wait for
    acknowledgements (acks=all); 0 means the gateway's request.timeout.ms. `acks` is None when
    the request named a value the wire does not define (refused as INVALID_REQUIRED_ACKS)."""

    acks: Acks | None = Acks.LEADER
    timeout_ms: int = 0
    transactional_id: str = ""


@dataclass(frozen=True, slots=True)
class ProducePart:
    """One partition's batches, as the producer encoded them."""

    tp: TopicPartition
    records: bytes | memoryview  # a view into the request's bytes, read by the servicer
    current_leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class ProducePartResult:
    """One partition's outcome, as the leader gave it (or as the gateway decided)."""

    tp: TopicPartition
    error_code: int = ErrorCode.NONE
    error_message: str = ""
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    last_offset: int = -1

    @classmethod
    def failed(cls, part: ProducePart, error: RiverlogError) -> ProducePartResult:
        return cls(part.tp, int(error.code), error.message)


_PRODUCER_ID = struct.Struct(">q")
_PRODUCER_ID_AT = 43  # in a RecordBatch v2 header


def unsequenced(part: ProducePart) -> bool:
    """Whether the part's batches have no producer id (no idempotence): their leader takes them
    in the order they come, with no sequence numbers to refuse one that overtook another."""
    records = part.records
    if len(records) < _PRODUCER_ID_AT + _PRODUCER_ID.size:
        return False  # not a batch: refused before routing
    return bool(_PRODUCER_ID.unpack_from(records, _PRODUCER_ID_AT)[0] < 0)


class StreamOrder:
    """One ProduceStream's requests, numbered as they arrive, and the newest request naming
    each partition: a request may re-send a partition (`may_resend`) only while it is that
    partition's newest. Used on the event loop only; holds a partition only while a request
    naming it is in progress."""

    def __init__(self) -> None:
        self._count = 0
        self._newest: dict[TopicPartition, int] = {}

    def arrived(self, tps: Iterable[TopicPartition]) -> int:
        """A request naming `tps` arrived (before any await of its handling): its number."""
        self._count += 1
        number = self._count
        for tp in tps:
            self._newest[tp] = number
        return number

    def may_resend(self, tp: TopicPartition, number: int) -> bool:
        return self._newest.get(tp) == number

    def done(self, tps: Iterable[TopicPartition], number: int) -> None:
        """Request `number` is answered."""
        for tp in tps:
            if self._newest.get(tp) == number:
                del self._newest[tp]


class ProduceSender(Protocol):
    """Sends one leader its share of a produce (implemented by `peers.storage`)."""

    async def produce(
        self,
        node: NodeInfo,
        options: ProduceOptions,
        parts: list[ProducePart],
        deadline: Deadline,
    ) -> list[ProducePartResult]: ...


class Producer:
    """Handles Produce and each request of ProduceStream. Stateless; safe to call from many
    tasks of the gateway's event loop at once."""

    def __init__(self, router: Router, sender: ProduceSender, config: GatewayConfig) -> None:
        self.router = router
        self.sender = sender
        self.config = config

    def check(self, options: ProduceOptions) -> ProduceOptions:
        """The options as forwarded; RiverlogError for a request that is wrong as a whole."""
        if options.acks not in _ACKS:
            raise RiverlogError(
                "unknown acks value (the wire's are ACKS_LEADER=0, ACKS_NONE=1, ACKS_ALL=2)",
                ErrorCode.INVALID_REQUIRED_ACKS,
            )
        require(
            0 <= options.timeout_ms <= _INT32_MAX,
            f"timeout_ms must be between 0 and {_INT32_MAX}, got {options.timeout_ms}",
        )
        if options.timeout_ms == 0:
            return ProduceOptions(
                options.acks, self.config.request_timeout_ms, options.transactional_id
            )
        return options

    async def produce(
        self,
        ctx: RequestContext,
        options: ProduceOptions,
        parts: Sequence[ProducePart],
        may_resend: Callable[[ProducePart], bool] | None = None,
    ) -> list[ProducePartResult]:
        """One result per part, in order. Raises RiverlogError only for a request that is wrong
        as a whole (unknown acks, negative timeout). A part `may_resend` refuses is not re-sent
        after a stale route: its error is its result."""
        options = self.check(options)
        errors = item_errors([p.tp for p in parts], lambda i: _part_error(parts[i]))
        answered = {i: ProducePartResult.failed(parts[i], e) for i, e in errors.items()}
        routed = [i for i in range(len(parts)) if i not in answered]
        if answered:
            log.info(
                "[%s] %d of %d partitions refused before routing", ctx, len(answered), len(parts)
            )
        if not routed:
            return merge(len(parts), answered, [], [])

        async def send(
            node: NodeInfo, batch: list[ProducePart], deadline: Deadline
        ) -> list[ProducePartResult]:
            return await self.sender.produce(node, _bounded(options, deadline), batch, deadline)

        results = await self.router.dispatch(
            [parts[i] for i in routed],
            send,
            ProducePartResult.failed,
            ctx.deadline,
            may_retry=may_resend,
        )
        return merge(len(parts), answered, routed, results)

    async def produce_or_fail(
        self,
        ctx: RequestContext,
        options: ProduceOptions,
        parts: Sequence[ProducePart],
        order: StreamOrder | None = None,
        number: int | None = None,
    ) -> list[ProducePartResult]:
        """`produce`, with a request-wide error given to every partition instead of raised (for
        streams, where one bad request must not end the others). With the stream's `order`,
        a partition without a producer id is re-sent only while no later request of the
        stream names it; `number` is what `order.arrived` gave the request at the top of its
        handling (None: it arrives now)."""
        may_resend = None
        if order is not None:
            if number is None:
                number = order.arrived([p.tp for p in parts])

            def may_resend(part: ProducePart) -> bool:
                return not unsequenced(part) or order.may_resend(part.tp, number)

        try:
            return await self.produce(ctx, options, parts, may_resend)
        except RiverlogError as exc:
            return [ProducePartResult.failed(p, exc) for p in parts]
        finally:
            if order is not None and number is not None:
                order.done([p.tp for p in parts], number)


def _part_error(part: ProducePart) -> RiverlogError | None:
    return internal_topic_error(part.tp.topic, "append to") or batch_payload_error(part.records)


def _bounded(options: ProduceOptions, deadline: Deadline) -> ProduceOptions:
    """The leader may not wait for acks longer than the request has left."""
    left_ms = int(deadline.remaining() * 1000)
    if options.timeout_ms <= left_ms:
        return options
    return ProduceOptions(options.acks, max(left_ms, 1), options.transactional_id)
