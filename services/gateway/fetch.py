"""Fetch of raw record batches: check, split by leader, long-poll all leaders at once, merge.

Leaders answer with stored batch bytes, which the gateway hands back as they are (FetchRecords
in `records.py` is the only fetch path that decodes). Long-poll parameters are passed through
with ONE overall `max_wait_ms`: every leader is asked at the same time, and a partition re-sent
after a stale route only waits for what is left of it. The response-wide `max_bytes` is shared
between the leaders of one request, so a fetch touching many leaders cannot add up to more than
a gRPC message can carry. Each leader is asked for its share of min_bytes, and the request
returns once the bytes in hand across its leaders reach min_bytes (`_LongPoll`); the leaders
still waiting then are not asked again, their partitions come back empty, and their calls are
parked for the same client's next fetch to join (`pending_polls.py`).

Fetching from the closest replica (KIP-392, decision 0038): a fetch that carries the client's
rack (`rack_id`) goes, partition by partition, to the replica `ReadReplicas` picks (with
`replica.selector.class=rack-aware`, an in-sync replica in that rack). A follower answers up to
its own high watermark (and last stable offset); a partition a follower fails (behind the
consumer's position: OFFSET_NOT_AVAILABLE, out of its range, not hosted, unreachable) is read
again from the leader within the same request, and that follower is passed over for it for a
while, so the client never sees a follower's error.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from riverlog.common.clock import SYSTEM_CLOCK, Clock
from riverlog.common.cluster.image import NodeInfo
from riverlog.common.errors import ErrorCode, RiverlogError
from riverlog.common.records.header import peek_size
from riverlog.common.records.reader import next_fetch_offset
from riverlog.common.types import IsolationLevel, TopicPartition

from .config import GatewayConfig
from .context import Deadline, RequestContext, measured
from .pending_polls import PendingPoll, PendingPolls, PollKey, PollState
from .routing.read_replica import ReadReplicas
from .routing.replica_selector import selector_named
from .routing.router import RouteFn, Router, merge
from .validation import item_errors, offset_error, require

log = logging.getLogger(__name__)

_INT32_MAX = 2**31 - 1
_ISOLATION_LEVELS = frozenset(IsolationLevel)


@dataclass(frozen=True, slots=True)
class FetchOptions:
    """The request-wide part of a fetch, as the client sent it."""

    max_wait_ms: int = 0
    min_bytes: int = 0
    max_bytes: int = 0
    isolation_level: IsolationLevel | None = IsolationLevel.READ_UNCOMMITTED
    """None: the request named a level the wire does not define (refused)."""
    replica_id: int | None = None
    rack_id: str = ""
    """The consumer's client.rack ("" none): where it may read from a follower."""


@dataclass(frozen=True, slots=True)
class FetchPart:
    tp: TopicPartition
    fetch_offset: int
    partition_max_bytes: int = 0
    current_leader_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class FetchPartResult:
    tp: TopicPartition
    error_code: int = ErrorCode.NONE
    error_message: str = ""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes | memoryview = b""
    """As the leader answered: over the zero-copy channel a view into the bytes read."""
    log_end_offset: int = -1
    aborted_transactions: tuple[tuple[int, int], ...] = ()
    """read_committed: (producer id, first offset) of the aborted transactions that meet
    `records`, as the leader answered them (passed on unchanged)."""

    @classmethod
    def failed(cls, part: FetchPart, error: RiverlogError) -> FetchPartResult:
        return cls(part.tp, int(error.code), error.message)


class FetchSender(Protocol):
    """Sends one leader its share of a fetch (implemented by `peers.storage`)."""

    async def fetch(
        self, node: NodeInfo, options: FetchOptions, parts: list[FetchPart], deadline: Deadline
    ) -> list[FetchPartResult]: ...


class Fetcher:
    """Handles Fetch, each request of FetchStream, and the fetch under FetchRecords. Its only
    state is the leader long polls requests stopped waiting for (`pending`, on the event
    loop); safe to call from many tasks at once."""

    def __init__(
        self,
        router: Router,
        sender: FetchSender,
        config: GatewayConfig,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.router = router
        self.sender = sender
        self.config = config
        self.clock = clock  # the one long-poll wait a request's retries share
        self.read_replicas = (
            ReadReplicas(
                router.cache,
                selector_named(config.replica_selector_class),
                config.metadata_max_age_ms,
                clock,
            )
            if config.replica_selector_class != "leader"
            else None
        )
        # Long polls a request stopped waiting for, until they finish (see `_LongPoll`).
        self._abandoned: set[asyncio.Future[list[FetchPartResult]]] = set()
        # The same calls, by the request they sent, for the client's next fetch to join.
        self.pending: PendingPolls[asyncio.Future[list[FetchPartResult]]] = PendingPolls()

    @property
    def abandoned_polls(self) -> int:
        """Leaders' long polls that requests stopped waiting for and that are still running."""
        return len(self._abandoned)

    def check(self, options: FetchOptions) -> FetchOptions:
        """The options as forwarded (sizes capped); RiverlogError for a request wrong as a
        whole."""
        require(
            options.replica_id is None,
            "replica_id is for storage nodes replicating a partition; clients leave it unset",
        )
        require(
            options.max_bytes > 0,
            f"max_bytes must be positive, got {options.max_bytes}",
            ErrorCode.INVALID_FETCH_SIZE,
        )
        require(options.min_bytes >= 0, f"min_bytes must not be negative, got {options.min_bytes}")
        require(
            options.max_wait_ms >= 0, f"max_wait_ms must not be negative, got {options.max_wait_ms}"
        )
        require(
            options.isolation_level in _ISOLATION_LEVELS,
            f"unknown isolation level {options.isolation_level}",
        )
        return FetchOptions(
            max_wait_ms=min(options.max_wait_ms, self.config.request_timeout_ms),
            min_bytes=options.min_bytes,
            max_bytes=min(options.max_bytes, self.config.fetch_max_bytes),
            isolation_level=options.isolation_level,
            rack_id=options.rack_id,
        )

    def _part(self, part: FetchPart, max_bytes: int) -> FetchPart:
        size = part.partition_max_bytes or min(self.config.max_partition_fetch_bytes, max_bytes)
        size = min(size, max_bytes)
        if size == part.partition_max_bytes:
            return part
        return FetchPart(part.tp, part.fetch_offset, size, part.current_leader_epoch)

    async def fetch(
        self, ctx: RequestContext, options: FetchOptions, parts: Sequence[FetchPart]
    ) -> list[FetchPartResult]:
        """One result per part, in order; RiverlogError for a request wrong as a whole."""
        options = self.check(options)
        errors = item_errors([p.tp for p in parts], lambda i: _part_error(parts[i]))
        answered = {i: FetchPartResult.failed(parts[i], e) for i, e in errors.items()}
        routed = [i for i in range(len(parts)) if i not in answered]
        if not routed:
            return merge(len(parts), answered, [], [])
        items = [self._part(parts[i], options.max_bytes) for i in routed]
        # The client's max_wait is one wait for the whole request, retries included.
        wait_until_ms = self.clock.monotonic_ms() + options.max_wait_ms
        replicas = self.read_replicas if options.rack_id else None
        route_fn: RouteFn | None = None
        if replicas is not None:
            rack = options.rack_id
            route_fn = lambda tp: replicas.route(tp, rack)  # noqa: E731
        served: dict[TopicPartition, int] = {}  # partitions a follower answered, by node id
        leaders = self._leader_count(items, route_fn)
        share = max(options.max_bytes // leaders, 1)
        poll = _LongPoll(
            options.min_bytes, self._abandoned, self.pending, self.clock, self._leader_epochs
        )
        caller = (ctx.principal, ctx.client_id, ctx.peer)

        def leader_options_now(batch: list[FetchPart], deadline: Deadline) -> FetchOptions:
            wait_ms = max(wait_until_ms - self.clock.monotonic_ms(), 0)
            return FetchOptions(
                # Leave the leader time to answer before the call's own deadline.
                max_wait_ms=min(wait_ms, int(deadline.remaining() * 900)),
                # Its share: a leader holding that much answers, and the request answers
                # once the answers in hand add up to min_bytes (`_LongPoll`).
                min_bytes=-(-options.min_bytes // leaders),
                max_bytes=min(share, sum(p.partition_max_bytes for p in batch)),
                isolation_level=options.isolation_level,
                rack_id=options.rack_id,
            )

        async def send(
            node: NodeInfo, batch: list[FetchPart], deadline: Deadline
        ) -> list[FetchPartResult]:
            leader_options = leader_options_now(batch, deadline)
            followed = [
                p.tp for p in batch if replicas and replicas.is_follower(p.tp, node.node_id)
            ]
            try:
                results = await poll.ask(
                    self.sender,
                    node,
                    batch,
                    deadline,
                    leader_options,
                    lambda: leader_options_now(batch, deadline),
                    leaders == 1 or options.min_bytes == 0,
                    caller,
                )
            except RiverlogError as exc:
                for tp in followed:
                    assert replicas is not None
                    replicas.pass_over(tp, node.node_id, exc.message)
                raise
            if replicas is not None:
                for part, result in zip(batch, results, strict=False):
                    if part.tp not in followed:
                        served.pop(part.tp, None)  # the leader's answer stands
                    else:
                        served[part.tp] = node.node_id
                        if result.error_code != ErrorCode.NONE:
                            why = f"error {result.error_code}: {result.error_message}"
                            replicas.pass_over(part.tp, node.node_id, why)
            return results

        results = await self.router.dispatch(
            items, send, FetchPartResult.failed, ctx.deadline, route_fn
        )
        if replicas is not None and served:
            results = await self._from_leaders(items, results, served, send, ctx)
        return merge(len(parts), answered, routed, results)

    async def _from_leaders(
        self,
        items: list[FetchPart],
        results: list[FetchPartResult],
        served: dict[TopicPartition, int],
        send: Callable[[NodeInfo, list[FetchPart], Deadline], Awaitable[list[FetchPartResult]]],
        ctx: RequestContext,
    ) -> list[FetchPartResult]:
        """The partitions a follower failed, fetched again from their leaders (the follower is
        passed over by then, so a route to the leader is what `dispatch` finds)."""
        failed = [
            i
            for i, r in enumerate(results)
            if r.error_code != ErrorCode.NONE and items[i].tp in served
        ]
        if not failed:
            return results
        again = await self.router.dispatch(
            [items[i] for i in failed], send, FetchPartResult.failed, ctx.deadline
        )
        out = list(results)
        for i, result in zip(failed, again, strict=True):
            out[i] = result
        return out

    def _leader_epochs(self, batch: Sequence[FetchPart]) -> tuple[int, ...]:
        """The leader epoch this gateway's metadata gives each partition now (-1: no leader)."""
        epochs = []
        for part in batch:
            try:
                epochs.append(self.router.cache.route(part.tp).leader_epoch)
            except RiverlogError:
                epochs.append(-1)
        return tuple(epochs)

    def _leader_count(self, items: Sequence[FetchPart], route_fn: RouteFn | None = None) -> int:
        """How many storage nodes the items go to now (at least 1), to share max_bytes
        between: their leaders, or the replicas `route_fn` picks."""
        find = route_fn or self.router.cache.route
        leaders = set()
        for item in items:
            try:
                leaders.add(find(item.tp).node.node_id)
            except RiverlogError:
                continue
        return max(len(leaders), 1)

    async def fetch_or_fail(
        self, ctx: RequestContext, options: FetchOptions, parts: Sequence[FetchPart]
    ) -> list[FetchPartResult]:
        """`fetch`, with a request-wide error given to every partition instead of raised."""
        try:
            return await self.fetch(ctx, options, parts)
        except RiverlogError as exc:
            return [FetchPartResult.failed(p, exc) for p in parts]


def _part_error(part: FetchPart) -> RiverlogError | None:
    if part.partition_max_bytes < 0:
        return RiverlogError(
            f"partition_max_bytes of {part.tp} is negative", ErrorCode.INVALID_FETCH_SIZE
        )
    return offset_error(part.fetch_offset)


def not_waited_for(batch: Sequence[FetchPart]) -> list[FetchPartResult]:
    """The answer for a leader's partitions when the request's min_bytes was met elsewhere
    before that leader answered: no records and no error, so the client's position stays
    where it was and its next fetch asks again. The high watermark and offsets are -1 (not
    known: the leader's answer was not waited for), as the wire allows for any partition."""
    return [FetchPartResult(part.tp) for part in batch]


Call = asyncio.Future[list[FetchPartResult]]


def poll_key(
    caller: tuple[str, str, str],
    node: NodeInfo,
    options: FetchOptions,
    batch: Sequence[FetchPart],
    leader_epochs: tuple[int, ...] = (),
) -> PollKey:
    """The key a leader call is parked and joined under (`pending_polls.PollKey`), with the
    leader epochs the gateway's metadata gave its partitions when the call was sent."""
    return PollKey(
        caller,
        node.key,
        node.address,
        options.isolation_level,
        options.rack_id,
        options.max_bytes,
        tuple((p.tp, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch) for p in batch),
        leader_epochs,
    )


def _records_size(results: Sequence[FetchPartResult]) -> int:
    """The record bytes of a leader's answer worth keeping for a join: 0 when any partition
    has an error (the next fetch asks afresh and sees the error itself)."""
    size = 0
    for result in results:
        if result.error_code != ErrorCode.NONE:
            return 0
        size += len(result.records)
    return size


def _complete_prefix(data: bytes | memoryview, limit: int | None = None) -> int:
    """The length of the complete batches at the start of `data`, as many as fit in `limit`
    bytes (None: all); -1 when `data` does not start with a batch."""
    pos = 0
    while True:
        try:
            size = peek_size(data, pos)
        except ValueError:
            return -1 if pos == 0 else pos
        if size < 0 or pos + size > len(data) or (limit is not None and pos + size > limit):
            return pos
        pos += size


def _complete_end(data: bytes | memoryview) -> int:
    """The length of the complete batches at the start of `data` (shorter than `data` when
    an answer ends in a batch cut at its size limit)."""
    return _complete_prefix(data)


def _extended(first: FetchPartResult, more: FetchPartResult, kept: int) -> FetchPartResult:
    """`first` followed by the first `kept` bytes of `more` (whole batches, fetched from
    where `first` ends), with the partition's offsets as `more` found them."""
    if more.error_code != ErrorCode.NONE or kept <= 0:
        return first
    return dataclasses.replace(
        first,
        records=b"".join((first.records, more.records[:kept])),
        high_watermark=more.high_watermark,
        last_stable_offset=more.last_stable_offset,
        log_start_offset=more.log_start_offset,
        log_end_offset=more.log_end_offset,
        aborted_transactions=tuple(
            sorted(
                set(first.aborted_transactions) | set(more.aborted_transactions),
                key=lambda a: (a[1], a[0]),
            )
        ),
    )


class _LongPoll:
    """The long poll of one fetch spread over several leaders. Each leader is asked for its
    share of min_bytes (rounded up), so a leader answers once it holds that much; once the
    answers in hand add up to min_bytes the request returns, as Kafka's fetch does, and the
    leaders still waiting are answered `not_waited_for`. A leader that answered while the sum
    is still short is asked again from where its answer ends for what is missing (`_top_up`),
    so one leader holding all of min_bytes answers the request as it did when each leader was
    asked for the whole of it. (Kafka's broker sums what all its partitions hold at every
    append; here leaders that each hold less than what they were asked for, say 10 and 40
    bytes of a min_bytes of 100 over two leaders, wait until one of them has enough or
    max_wait passes: the leaders can be told a smaller need only by a new call.)

    The calls of the leaders still waiting are abandoned, not cancelled: a zero-copy exchange
    cancelled mid-way loses its framing and closes its connection, and the channel has no
    cancel message. An abandoned call finishes on its connection (when that leader has data or
    its wait runs out, within the request's deadline). Until then, and for its wait again if
    it answered with records, it is parked in the Fetcher's `PendingPolls`, where the same
    client's next fetch of the same partitions at the same offsets joins it: a running call is
    waited on instead of parking a second poll on that leader, records are returned then (and
    charged then, by the servicer). An answer nobody joins is dropped and never charged."""

    def __init__(
        self,
        min_bytes: int,
        abandoned: set[Call],
        pending: PendingPolls[Call],
        clock: Clock,
        leader_epochs: Callable[[Sequence[FetchPart]], tuple[int, ...]] = lambda batch: (),
    ) -> None:
        self.min_bytes = min_bytes
        self.received = 0
        self.satisfied = asyncio.Event()
        self.abandoned = abandoned  # the Fetcher's: holds the calls until they finish
        self.pending = pending
        self.clock = clock
        # A parked answer may outlive its leader's log: after a leader change the new
        # leader's log can be shorter (truncated), and the old one truncates to it once it
        # follows. So a key holds the epochs known when its call was sent, and a fetch made
        # once the epoch of one of its partitions moved never joins it (nor a call running
        # under the old epoch).
        self.leader_epochs = leader_epochs

    def add(self, results: list[FetchPartResult]) -> list[FetchPartResult]:
        self._count(sum(len(r.records) for r in results))
        return results

    def _count(self, size: int) -> None:
        self.received += size
        if self.received >= self.min_bytes and self.received > 0:
            self.satisfied.set()

    async def ask(
        self,
        sender: FetchSender,
        node: NodeInfo,
        batch: list[FetchPart],
        deadline: Deadline,
        options: FetchOptions,
        options_now: Callable[[], FetchOptions],
        alone: bool,
        caller: tuple[str, str, str],
    ) -> list[FetchPartResult]:
        """One leader's answer to its share of the request: a parked call of the same request
        joined, or a new call. `alone`: no other leader's answer can meet min_bytes (one
        leader, or min_bytes 0), so nothing cuts this one short. `options_now` gives the
        options again with what is left of the wait (after a joined call came back empty)."""
        epochs = self.leader_epochs(batch)
        key = poll_key(caller, node, options, batch, epochs) if len(self.pending) else None
        entry = self.pending.take(key, self.clock.monotonic_ms()) if key is not None else None
        if entry is not None:
            assert key is not None
            joined = await self._join(entry, key, node, batch, options, alone)
            if joined is not None:
                return await self._top_up(
                    sender, node, batch, deadline, joined, options_now, caller
                )
            options = options_now()  # the joined call ended empty: ask with the wait left
        long_poll = not alone and options.max_wait_ms > 0
        if not long_poll:
            return self.add(await sender.fetch(node, options, batch, deadline))
        key = poll_key(caller, node, options, batch, epochs)  # as the call is sent
        call = asyncio.ensure_future(measured(sender.fetch(node, options, batch, deadline)))
        if await self._wait(call):
            results = self.add(call.result())
            return await self._top_up(sender, node, batch, deadline, results, options_now, caller)
        log.debug("min_bytes met elsewhere; storage node %d's long poll parked", node.node_id)
        self._park(call, key, options.max_wait_ms)
        return not_waited_for(batch)

    async def _top_up(
        self,
        sender: FetchSender,
        node: NodeInfo,
        batch: list[FetchPart],
        deadline: Deadline,
        results: list[FetchPartResult],
        options_now: Callable[[], FetchOptions],
        caller: tuple[str, str, str],
    ) -> list[FetchPartResult]:
        """`results` (this leader's answer, already counted), extended while min_bytes is
        not met across the leaders: the leader is asked again from where its answer ends, for
        what is still missing, with the wait left, so a leader that holds more than its share
        can meet min_bytes alone as Kafka's broker would. The call asks what the client's next
        fetch of these partitions will ask (the same sizes, at the offsets it will be at), so
        if min_bytes is met elsewhere first it is parked for that fetch like any other; its
        records are cut at a batch boundary to what the request still has room for (the rest
        is read again by the next fetch). Ends when min_bytes is met, the wait runs out, an
        answer has an error, or an answer ends in a cut batch."""
        while not self.satisfied.is_set():
            options = options_now()
            need = self.min_bytes - self.received
            got = _records_size(results)
            if got == 0 or need <= 0 or options.max_wait_ms <= 0:
                break
            if any(_complete_end(r.records) != len(r.records) for r in results):
                break  # a partition is full: Kafka's broker would answer now too
            more = [
                FetchPart(
                    part.tp,
                    next_fetch_offset(result.records, part.fetch_offset),
                    part.partition_max_bytes,
                    part.current_leader_epoch,
                )
                for part, result in zip(batch, results, strict=True)
            ]
            options = dataclasses.replace(options, min_bytes=need)
            key = poll_key(caller, node, options, more, self.leader_epochs(more))
            call = asyncio.ensure_future(measured(sender.fetch(node, options, more, deadline)))
            if not await self._wait(call):
                log.debug("min_bytes met elsewhere; storage node %d's top-up parked", node.node_id)
                self._park(call, key, options.max_wait_ms)
                break
            try:
                extra = call.result()
            except RiverlogError as exc:
                log.debug("storage node %d failed a top-up fetch: %s", node.node_id, exc)
                break
            if _records_size(extra) == 0 or len(extra) != len(more):
                break
            budget = options.max_bytes - got
            merged = []
            for part, first, result in zip(batch, results, extra, strict=True):
                room = min(part.partition_max_bytes - len(first.records), budget)
                kept = _complete_prefix(result.records, room)
                budget -= kept
                merged.append(_extended(first, result, kept))
            grown = sum(len(m.records) for m in merged) - got
            results = merged
            if grown <= 0:
                break  # no room left for any of it
            self._count(grown)
        return results

    async def _join(
        self,
        entry: PendingPoll[Call],
        key: PollKey,
        node: NodeInfo,
        batch: list[FetchPart],
        options: FetchOptions,
        alone: bool,
    ) -> list[FetchPartResult] | None:
        """The answer of a parked call taken from the table, or None when it has nothing to
        give (ended empty or failed): the caller then asks the leader itself. A running call
        is waited on for this request's own wait; if min_bytes is met elsewhere first, or the
        wait ends, it is parked again for the next fetch."""
        call = entry.handle
        if not call.done():
            if options.max_wait_ms <= 0 or options.min_bytes <= 0:
                # Not a long poll: read now. The parked call stays for a later fetch.
                self.pending.park(key, call, self.clock.monotonic_ms())
                return None
            log.debug("joining storage node %d's parked long poll", node.node_id)
            wait_s = options.max_wait_ms / 1000
            if alone:
                answered = bool((await asyncio.wait({call}, timeout=wait_s))[0])
            else:
                answered = await self._wait(call, wait_s)
            if not answered:
                self.pending.park(key, call, self.clock.monotonic_ms())
                return not_waited_for(batch)
        if call.cancelled() or call.exception() is not None:
            return None
        results = call.result()
        if entry.state is PollState.RUNNING and _records_size(results) == 0:
            return None  # it ended empty: this request's own wait is not over yet
        if len(results) != len(batch) or any(
            r.tp != p.tp or r.error_code != ErrorCode.NONE
            for r, p in zip(results, batch, strict=False)
        ):
            return None
        log.debug("storage node %d's parked answer joined", node.node_id)
        return self.add(results)

    async def _wait(self, call: Call, timeout_s: float | None = None) -> bool:
        """Wait for `call` until min_bytes is met elsewhere (or `timeout_s` passes: a joined
        call may have been started with a longer wait than this request's); whether the call
        answered. A call that answers in the same step as min_bytes is met counts as
        answered."""
        enough = asyncio.ensure_future(self.satisfied.wait())
        waited: set[asyncio.Future[Any]] = {call, enough}
        try:
            await asyncio.wait(waited, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            call.cancel()  # the request itself is going away
            raise
        finally:
            enough.cancel()
        return call.done()

    def _park(self, call: Call, key: PollKey | None, keep_ms: int) -> None:
        """Hold `call` until it finishes, joinable under `key` (None: not joinable)."""
        pending = self.pending
        clock = self.clock
        if key is not None:
            pending.park(key, call, clock.monotonic_ms())
        self.abandoned.add(call)

        def finished(future: Call) -> None:
            self.abandoned.discard(future)
            size = 0
            if not future.cancelled():
                if future.exception() is not None:
                    log.debug("an abandoned long poll failed: %s", future.exception())
                else:
                    size = _records_size(future.result())
            if key is not None:
                pending.answered(key, future, size, keep_ms, clock.monotonic_ms())

        call.add_done_callback(finished)
